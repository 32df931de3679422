package rules

import (
	"slices"

	"cel.dev/cel-go/cel"
	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
)

// RuleSet is a loaded, compiled and checked set of rules. It is immutable:
// a reload builds a new one and the engine swaps it between rounds.
type RuleSet struct {
	Version   string        // short hex of the sha256 of the sorted files' names and contents
	Files     []string      // the files it was loaded from, sorted
	Rules     []*Rule       // in stratified order: a rule comes after every rule it reads from
	Schema    *facts.Schema // the schema patterns and heads were typed against
	CostLimit uint64        // the CEL cost budget of one evaluation of one expression

	// Sources holds every file's parsed form, for printing diagnostics with
	// source snippets (hcl.NewDiagnosticTextWriter).
	Sources map[string]*hcl.File

	byName map[string]*Rule
}

// Rule returns the rule of the given name.
func (rs *RuleSet) Rule(name string) (*Rule, bool) {
	r, ok := rs.byName[name]
	return r, ok
}

// HeadKind says how a head writes.
type HeadKind int

const (
	// Derive maintains a view: the engine keeps exactly the keys the body
	// derives under the head's template and deletes the others.
	Derive HeadKind = iota
	// Emit is an action: it writes when the guard holds (nothing when the
	// value is already equal); it must make its own guard false.
	Emit
	// Delete is an action that deletes the key when the guard holds.
	Delete
)

func (k HeadKind) String() string {
	switch k {
	case Derive:
		return "derive"
	case Emit:
		return "emit"
	case Delete:
		return "delete"
	}
	return "?"
}

// Rule is one compiled rule. Evaluation order inside a binding: Body's match,
// optional, absent, aggregates, lets; then When; then Choose; then Fresh;
// then the heads.
type Rule struct {
	Name      string
	Doc       string
	Principal string
	File      string
	Range     hcl.Range // the rule block's header
	After     []string  // rules this one is ordered after (its writes win)
	// Guards names aggregates of the body, shared or its own, that its
	// firings are guarded by (guard = ["placed"]), as an aggregate's own
	// guard = true does: a shared aggregate serves rules that do not guard.
	Guards  []string
	Body    *Scope
	When    *Expr // nil: always
	Choose  *Choice
	Fresh   *Fresh
	Heads   []*Head
	Stratum int // index of the rule's strongly connected component in dependency order
	// Summary: declared as a summary block, a rule for people (summary.go):
	// derive heads only, read by no rule, ordered after every rule.
	Summary bool
	Index   int // position in RuleSet.Rules

	afterRanges []hcl.Range // where each After name is written
}

// Derives reports whether the rule maintains a view (its heads are derive heads).
func (r *Rule) Derives() bool { return len(r.Heads) > 0 && r.Heads[0].Kind == Derive }

// Scope is a conjunction of patterns with what is computed from them. The
// rule body is one; every aggregate and the choice have their own, which
// see the variables of the scope around them (Outer).
type Scope struct {
	Match      []*Pattern
	Optional   []*Pattern
	Absent     []*Pattern
	Aggregates []*Aggregate
	Lets       []*Let
	Outer      []string // variables bound around the scope that its patterns use, sorted
	Binds      []string // variables the scope's match and optional patterns bind, sorted
	// Hints maps a match alias to the only values its guard (the rule's
	// when, an aggregate's where) lets through: `state == 'pending'`. The
	// evaluator may then find those facts by value instead of by scanning.
	Hints map[string][]string
}

// Seg is one segment of a pattern or head template: a literal or a variable.
type Seg struct {
	Lit string
	Var string
}

// Pattern is a fact pattern: a key template whose {variables} bind path
// segments, and an alias that binds the fact's decoded value. A variable or
// alias already bound is a join: the segment (or the value) must equal it.
type Pattern struct {
	Alias    string // "" for an absent pattern
	Template string
	Type     *facts.FactType
	Segs     []Seg
	Range    hcl.Range // the template string
	Optional bool
	Negated  bool
}

// Guarded reports whether r's firings are guarded by aggregate ag: its own
// guard = true, or the rule's guard list naming it.
func (r *Rule) Guarded(ag *Aggregate) bool { return ag.Guard || slices.Contains(r.Guards, ag.Name) }

// Vars returns the pattern's path variables in template order.
func (p *Pattern) Vars() []string { return segVars(p.Segs) }

func segVars(segs []Seg) []string {
	var out []string
	for _, s := range segs {
		if s.Var != "" {
			out = append(out, s.Var)
		}
	}
	return out
}

// Expr is a compiled, type-checked CEL expression.
type Expr struct {
	Src     string
	Range   hcl.Range
	Program cel.Program
	// Fast is Program without cost tracking, set when CEL's estimate of the
	// expression's cost with every variable at most FastSize large is
	// within the cost limit: evaluated with such values it cannot exceed
	// the limit, so tracking would only cost time. Nil otherwise.
	Fast cel.Program
	Type *cel.Type // the checked output type
	AST  *cel.Ast  // the checked expression
}

// Aggregate computes count, sum, min or max over the bindings of its own
// scope that satisfy Where, grouped by the variables bound around it.
// count and sum of nothing are 0; min and max of nothing are an empty
// optional (use .orValue(x) or .hasValue()).
type Aggregate struct {
	Name  string
	Func  string // count, sum, min, max
	Of    *Expr  // the value summed or compared; nil for count
	Where *Expr  // nil: every binding counts
	Body  *Scope
	Type  *cel.Type
	Range hcl.Range
	// Params are the names a shared aggregate is grouped by (nil for one
	// written in its rule). It sees only these of the rule's names, and one
	// *Aggregate serves every rule that binds them to the same types.
	Params []string
	// Guard makes a firing that read the aggregate commit only if what it
	// counted still stands (guard = true): the members' facts are compared
	// at commit, those written earlier in the same plan by ordering; past
	// a limit of member facts (eval.MaxGuardedReads), the firing commits only if every
	// firing before it in its plan did (see docs/rules.md, "guard").
	Guard bool
}

// Let binds a name to a CEL expression over what is bound before it.
type Let struct {
	Name string
	Expr *Expr
}

// Choice picks candidate bindings of its scope among those passing every
// filter: the first by Order (or the highest Score), Pick of them (one when
// Pick is nil); ties go to the candidate whose variables (Vars, in order)
// are lexicographically smallest.
type Choice struct {
	Name    string
	Body    *Scope
	Filters []*Filter
	// Pass is every filter in one expression, `(f1) && (f2) && ...`: a
	// candidate for which it holds passes each of them, and one
	// evaluation tells so instead of one per filter. When it does not
	// hold, or fails, each filter is evaluated alone to tell which reject
	// the candidate. Nil with fewer than two filters, or when they count
	// their CEL cost (Expr.Fast).
	Pass  *Expr
	Score *Expr       // nil: every candidate scores 0
	Order []*OrderKey // sort keys, most significant first; set instead of Score
	Pick  *Expr       // how many candidates to pick, an int over the rule's binding; nil: one
	Vars  []string    // the candidate's own variables, sorted
	Range hcl.Range
	// Exact says the policy asked for the first of every candidate in its
	// ranking: exact = true, an order list, a pick, or no score (the
	// tie-break order is the ranking). A choice that only scores, for one
	// pick, asks for a good candidate, and the engine may score a sample
	// of a large candidate set (eval.SampleSize).
	Exact bool
	// Candidates, from candidates = N, overrides the engine's sample: at
	// most N candidates that pass every filter are scored (0: the
	// engine's choice). With more candidates than that, the visit starts
	// at an offset drawn from a hash of the outer binding and goes round in
	// candidate order, stopping once Candidates have passed the filters: the
	// choice is the best of a deterministic sample, as Nomad's and
	// Kubernetes' schedulers score a bounded share of the nodes.
	Candidates int
}

// OrderKey is one sort key of a choice: candidates are ordered by the
// value of Expr, ascending unless Desc (false before true, as SQL's ORDER
// BY), and the first ones are picked.
type OrderKey struct {
	Expr *Expr
	Desc bool
}

// Filter is a named condition a candidate must pass; a candidate failing
// one or more is recorded with all their names.
type Filter struct {
	Name string
	Expr *Expr
}

// Fresh draws new ids (5 lowercase hex chars) for Var: Count of them per
// binding (1 when Count is nil). A drawn id whose keys exist is redrawn.
type Fresh struct {
	Var   string
	Count *Expr
	Range hcl.Range
}

// Head is a key the rule writes (or deletes), with its value expression.
type Head struct {
	Kind     HeadKind
	Template string
	Type     *facts.FactType
	Segs     []Seg
	Value    *Expr // nil for Delete
	Range    hcl.Range

	prefix bool // one of the heads a delete by prefix stands for (prefix.go)
}

// Vars returns the head template's variables in template order.
func (h *Head) Vars() []string { return segVars(h.Segs) }

// Format renders the head's key from variable values.
func (h *Head) Format(val func(v string) string) string {
	return formatSegs(h.Segs, val)
}

// formatSegs renders the key segs make of variable values.
func formatSegs(segs []Seg, val func(string) string) string {
	var buf [128]byte // most keys fit: one allocation, the string
	return string(appendSegs(buf[:0], segs, val))
}

// AppendFormat appends the pattern's key from variable values to dst: a
// caller with a buffer looks a key up without allocating it.
func (p *Pattern) AppendFormat(dst []byte, val func(v string) string) []byte {
	return appendSegs(dst, p.Segs, val)
}

// appendSegs appends the key segs render from variable values to dst.
func appendSegs(dst []byte, segs []Seg, val func(string) string) []byte {
	for i, s := range segs {
		if i > 0 {
			dst = append(dst, '/')
		}
		if s.Var != "" {
			dst = append(dst, val(s.Var)...)
		} else {
			dst = append(dst, s.Lit...)
		}
	}
	return dst
}
