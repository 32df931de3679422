package rules

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

var fileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "rule", LabelNames: []string{"name"}},
	{Type: "summary", LabelNames: []string{"name"}}, // a rule for people (summary.go)
	// Shared definitions (shared.go).
	{Type: "aggregate", LabelNames: []string{"name"}},
	{Type: "relation", LabelNames: []string{"name"}},
	{Type: "counts"}, {Type: "let"}, {Type: "const"},
	{Type: "action", LabelNames: []string{"name"}}, // heads several rules take (action.go)
}}

var ruleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "doc"}, {Name: "principal"}, {Name: "when"}, {Name: "after"}, {Name: "absent"}, {Name: "guard"}, {Name: "over"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "match"}, {Type: "optional"}, {Type: "let"},
		{Type: "aggregate", LabelNames: []string{"name"}},
		{Type: "choose", LabelNames: []string{"name"}},
		{Type: "fresh", LabelNames: []string{"var"}},
		{Type: "derive", LabelNames: []string{"key"}},
		{Type: "emit", LabelNames: []string{"key"}},
		{Type: "delete", LabelNames: []string{"key"}},
		{Type: "do", LabelNames: []string{"action"}},
	},
}

var aggregateSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "where"}, {Name: "absent"}, {Name: "over"}, {Name: "count"}, {Name: "sum"}, {Name: "min"}, {Name: "max"}, {Name: "guard"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "match"}, {Type: "optional"}},
}

var chooseSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "score"}, {Name: "order"}, {Name: "pick"}, {Name: "absent"}, {Name: "over"}, {Name: "candidates"}, {Name: "exact"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "match"}, {Type: "optional"}, {Type: "let"}, {Type: "filters"},
		{Type: "aggregate", LabelNames: []string{"name"}},
	},
}

var freshSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "count"}}}
var valueSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "value", Required: true}}}
var emptySchema = &hcl.BodySchema{}

// compiler compiles the rules of one file.
type compiler struct {
	*loader
	file  string
	src   []byte
	diags hcl.Diagnostics

	defs   *defs             // the rule set's shared definitions
	uses   *uses             // what the rule being compiled reads of them
	shared *aggDef           // the shared aggregate being compiled, if any
	args   map[string]inline // the params of the action being compiled into a rule
}

func (c *compiler) errorf(rng hcl.Range, summary, format string, args ...any) {
	r := rng
	c.diags = append(c.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
		Detail: fmt.Sprintf(format, args...), Subject: &r})
}

// attrs returns a block's attributes in source order.
func attrs(body hcl.Body) ([]*hcl.Attribute, hcl.Diagnostics) {
	m, diags := body.JustAttributes()
	out := make([]*hcl.Attribute, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Start.Byte < out[j].Range.Start.Byte })
	return out, diags
}

func (c *compiler) rule(block *hcl.Block) *Rule {
	r := &Rule{Name: block.Labels[0], File: c.file, Range: block.DefRange, Summary: block.Type == "summary"}
	if d := checkIdent(r.Name, "Rule name", block.LabelRanges[0]); d != nil {
		d.Summary = "Invalid rule name"
		c.diags = append(c.diags, d)
	}
	content, diags := block.Body.Content(ruleSchema)
	c.diags = append(c.diags, diags...)
	if a := content.Attributes["doc"]; a != nil {
		if s, d := stringOf(a.Expr, c.src, "the rule's documentation"); d != nil {
			c.diags = append(c.diags, d...)
		} else if strings.TrimSpace(s.val) == "" {
			c.errorf(a.Expr.Range(), "Empty doc", "Rule %q needs a doc string saying what it maintains or does, in a sentence.", r.Name)
		} else {
			r.Doc = s.val
		}
	} else {
		c.errorf(block.DefRange, "Missing doc", "Rule %q has no doc = \"...\": every rule says in a sentence what it maintains or does.", r.Name)
	}
	if a := content.Attributes["principal"]; a != nil {
		if s, d := stringOf(a.Expr, c.src, "a principal name"); d != nil {
			c.diags = append(c.diags, d...)
		} else if _, ok := Principals[s.val]; !ok {
			detail := fmt.Sprintf("%q is not a principal; expected one of %s.", s.val, strings.Join(principalNames(), ", "))
			if n, ok := Closest(s.val, principalNames()); ok {
				detail += fmt.Sprintf(" Did you mean %q?", n)
			}
			c.errorf(a.Expr.Range(), "Unknown principal", "%s", detail)
		} else {
			r.Principal = s.val
		}
	} else {
		c.errorf(block.DefRange, "Missing principal", "Rule %q has no principal = \"...\": the principal says which trees the rule may write (%s).", r.Name, strings.Join(principalNames(), ", "))
	}
	if a := content.Attributes["after"]; a != nil {
		r.After, r.afterRanges = c.nameList(a)
	}
	c.uses = c.usesOf(block)
	defer func() { c.uses = nil }()
	vs := newVars()
	// over = "placement" binds the patterns of shared relations, as an
	// aggregate's or a choice's over does.
	content, absents := c.overRelation(content)
	r.Body = c.scope(content, vs, true, absents...)
	if a := content.Attributes["when"]; a != nil {
		r.When = c.expr(a, vs, "a boolean CEL guard", boolOnly)
		r.Body.Hints = valueHints(r.When, stringAliases(r.Body))
	}
	if a := content.Attributes["guard"]; a != nil {
		names, ranges := c.stringList(a, "aggregate names such as [\"placed\", \"healthy\"]")
		for i, n := range names {
			if !slices.ContainsFunc(r.Body.Aggregates, func(ag *Aggregate) bool { return ag.Name == n }) {
				c.errorf(ranges[i], "Unknown aggregate", "guard names %q, which is not an aggregate rule %q reads in its body (its own, or a shared one its when, lets or heads read).", n, r.Name)
				continue
			}
			r.Guards = append(r.Guards, n)
		}
	}
	chooses := content.Blocks.OfType("choose")
	for i, b := range chooses {
		if i > 0 {
			c.errorf(b.DefRange, "Duplicate choose", "A rule has at most one choice (pick = \"n\" picks several candidates of it); rule %q has a second choose block.", r.Name)
			continue
		}
		r.Choose = c.choice(b, vs)
	}
	for i, b := range content.Blocks.OfType("fresh") {
		if i > 0 {
			c.errorf(b.DefRange, "Duplicate fresh", "A rule draws at most one kind of fresh id.")
			continue
		}
		r.Fresh = c.fresh(b, vs)
	}
	for _, b := range content.Blocks {
		var k HeadKind
		switch b.Type {
		case "derive":
			k = Derive
		case "emit":
			k = Emit
		case "delete":
			k = Delete
			if isPrefixDelete(b) {
				r.Heads = append(r.Heads, c.prefixHeads(b, vs)...)
				continue
			}
		case "do":
			c.doAction(r, b, vs)
			continue
		default:
			continue
		}
		if h := c.head(b, k, vs); h != nil {
			r.Heads = append(r.Heads, h)
		}
	}
	c.checkHeadKinds(r, block, content)
	if r.Summary {
		c.summaryHeads(r, content)
	}
	return r
}

func (c *compiler) checkHeadKinds(r *Rule, block *hcl.Block, content *hcl.BodyContent) {
	declared := len(content.Blocks.OfType("derive")) + len(content.Blocks.OfType("emit")) + len(content.Blocks.OfType("delete")) + len(content.Blocks.OfType("do"))
	if declared == 0 {
		c.errorf(block.DefRange, "Rule writes nothing", "Rule %q has no derive, emit or delete head, nor a do block taking an action.", r.Name)
		return
	}
	derives := 0
	for _, h := range r.Heads {
		if h.Kind == Derive {
			derives++
		}
	}
	if derives > 0 && derives < len(r.Heads) {
		c.errorf(block.DefRange, "Mixed heads", "Rule %q mixes derive heads with emit/delete heads: a rule either maintains a view or acts. Split it in two rules.", r.Name)
	}
	if r.Fresh != nil {
		used := false
		for _, h := range r.Heads {
			for _, v := range h.Vars() {
				used = used || v == r.Fresh.Var
			}
		}
		if !used && len(r.Heads) > 0 {
			c.errorf(r.Fresh.Range, "Unused fresh id", "Rule %q draws fresh {%s} but no head uses it: a fresh id names the entity the heads create, e.g. emit \"observed/instance/{%s}/state\".", r.Name, r.Fresh.Var, r.Fresh.Var)
		}
	}
	for _, ag := range r.Body.Aggregates {
		if r.Guarded(ag) && derives > 0 {
			c.errorf(ag.Range, "Guard in a derive", "Aggregate %q is guarded, but rule %q maintains a view, which follows its members anyway; guard = true is for actions that decide on a count (stopping extras).", ag.Name, r.Name)
		}
	}
	if r.Choose != nil {
		for _, ag := range r.Choose.Body.Aggregates {
			if ag.Guard {
				c.errorf(ag.Range, "Guard in a choice", "Aggregate %q of choose %q is guarded; guard = true is for the rule's own aggregates, the counts its decision rests on.", ag.Name, r.Choose.Name)
			}
		}
	}
	if derives > 0 && r.Fresh != nil {
		c.errorf(r.Fresh.Range, "Fresh id in a derive", "A derived view is a function of the facts; fresh ids belong to emit rules.")
	}
}

func (c *compiler) nameList(a *hcl.Attribute) ([]string, []hcl.Range) {
	return c.stringList(a, "rule names such as [\"resolve_intent\"]")
}

// scope compiles match, optional, absent, aggregates and lets of a body,
// declaring what they bind in vs. Aggregates and lets only where allowed.
func (c *compiler) scope(content *hcl.BodyContent, vs *vars, full bool, absents ...*hcl.Attribute) *Scope {
	sc := &Scope{}
	outer := vs.clone()
	binds := map[string]bool{}
	for _, b := range content.Blocks.OfType("match") {
		as, d := attrs(b.Body)
		c.diags = append(c.diags, d...)
		for _, a := range as {
			if p := c.pattern(a.Name, a.NameRange, a.Expr, false, false); p != nil {
				c.bindPattern(p, vs, binds)
				sc.Match = append(sc.Match, p)
			} else {
				c.declareBroken(a, vs)
			}
		}
	}
	for _, b := range content.Blocks.OfType("optional") {
		as, d := attrs(b.Body)
		c.diags = append(c.diags, d...)
		for _, a := range as {
			p := c.pattern(a.Name, a.NameRange, a.Expr, true, false)
			if p == nil {
				c.declareBroken(a, vs)
				continue
			}
			for _, v := range p.Vars() {
				if !vs.has(v) {
					c.errorf(p.Range, "Unbound variable", "Optional pattern %q uses {%s}, which no match pattern binds; an optional pattern only looks up a key whose variables are bound.", p.Template, v)
				}
			}
			if vs.has(p.Alias) {
				c.errorf(a.NameRange, "Alias already bound", "%q is already bound; an optional pattern's alias must be a new name (it holds an optional value: %s.orValue(...)).", p.Alias, p.Alias)
				continue
			}
			vs.add(p.Alias, cel.OptionalType(CELType(p.Type.Value.Kind)))
			binds[p.Alias] = true
			sc.Optional = append(sc.Optional, p)
		}
	}
	if a := content.Attributes["absent"]; a != nil {
		absents = append([]*hcl.Attribute{a}, absents...)
	}
	for _, a := range absents {
		exprs, d := hcl.ExprList(a.Expr)
		if d.HasErrors() {
			c.errorf(a.Expr.Range(), "Expected a list", "absent takes a list of key templates such as [\"placement/instance/{id}\"].")
		}
		for _, e := range exprs {
			if p := c.pattern("", hcl.Range{}, e, false, true); p != nil {
				sc.Absent = append(sc.Absent, p)
			}
		}
	}
	for _, p := range append(append([]*Pattern{}, sc.Match...), sc.Optional...) {
		for _, v := range append(p.Vars(), p.Alias) {
			if v != "" && outer.has(v) {
				sc.Outer = appendUnique(sc.Outer, v)
			}
		}
	}
	for _, p := range sc.Absent {
		for _, v := range p.Vars() {
			if outer.has(v) {
				sc.Outer = appendUnique(sc.Outer, v)
			}
		}
	}
	for v := range binds {
		sc.Binds = append(sc.Binds, v)
	}
	sort.Strings(sc.Binds)
	sort.Strings(sc.Outer)
	if !full {
		return sc
	}
	c.placeShared(sc, vs)
	for _, b := range content.Blocks.OfType("aggregate") {
		if ag := c.aggregate(b, vs); ag != nil {
			sc.Aggregates = append(sc.Aggregates, ag)
		}
	}
	for _, b := range content.Blocks.OfType("let") {
		as, d := attrs(b.Body)
		c.diags = append(c.diags, d...)
		for _, a := range as {
			if d := checkIdent(a.Name, "Let name", a.NameRange); d != nil {
				c.diags = append(c.diags, d)
				continue
			}
			if vs.has(a.Name) {
				c.errorf(a.NameRange, "Name already bound", "%q is already bound in this rule; a let binds a new name.", a.Name)
				continue
			}
			e := c.expr(a, vs, "a CEL expression", nil)
			if e == nil {
				vs.add(a.Name, cel.DynType) // keep going: later uses are not errors too
				continue
			}
			vs.add(a.Name, e.Type)
			sc.Lets = append(sc.Lets, &Let{Name: a.Name, Expr: e})
		}
	}
	return sc
}

// declareBroken declares the names of a pattern that did not compile as
// dyn, so that one mistake is reported once, not again at every use.
func (c *compiler) declareBroken(a *hcl.Attribute, vs *vars) {
	if !vs.has(a.Name) && identRE.MatchString(a.Name) {
		vs.add(a.Name, cel.DynType)
	}
	if s, d := stringOf(a.Expr, c.srcOf(a.Expr.Range()), ""); d == nil {
		for _, p := range strings.Split(s.val, "/") {
			if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") && identRE.MatchString(p[1:len(p)-1]) && !vs.has(p[1:len(p)-1]) {
				vs.add(p[1:len(p)-1], cel.StringType)
			}
		}
	}
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// pattern parses and types one fact pattern.
func (c *compiler) pattern(alias string, aliasRng hcl.Range, expr hcl.Expression, optional, negated bool) *Pattern {
	if alias != "" {
		if d := checkIdent(alias, "Alias", aliasRng); d != nil {
			c.diags = append(c.diags, d)
			return nil
		}
	}
	s, d := stringOf(expr, c.srcOf(expr.Range()), "a key template")
	if d != nil {
		c.diags = append(c.diags, d...)
		return nil
	}
	segs, d := parseTemplate(s, "a key template")
	if d != nil {
		c.diags = append(c.diags, d...)
		return nil
	}
	t := resolveType(c.schema, segs)
	if t == nil {
		c.diags = append(c.diags, unknownKeyForm(c.schema, s, segs))
		return nil
	}
	return &Pattern{Alias: alias, Template: s.val, Type: t, Segs: segs, Range: s.rng, Optional: optional, Negated: negated}
}

// bindPattern declares a match pattern's variables and alias. A name bound
// twice is a join; a segment joins only with a string value.
func (c *compiler) bindPattern(p *Pattern, vs *vars, binds map[string]bool) {
	for _, v := range p.Vars() {
		if t, ok := vs.types[v]; ok {
			if t.Kind() != types.StringKind {
				c.errorf(p.Range, "Join type mismatch", "{%s} is a key segment (a string) but %s is bound to a %s value; only string values can be joined to key segments.", v, v, t)
			}
			continue
		}
		vs.add(v, cel.StringType)
		binds[v] = true
	}
	at := CELType(p.Type.Value.Kind)
	if t, ok := vs.types[p.Alias]; ok {
		if t.String() != at.String() {
			c.errorf(p.Range, "Join type mismatch", "Alias %s is already bound to a %s; this pattern's value (%s) is a %s, so they cannot be equal.", p.Alias, t, p.Type.Template, at)
		}
		return
	}
	vs.add(p.Alias, at)
	binds[p.Alias] = true
}

func (c *compiler) aggregate(b *hcl.Block, vs *vars) *Aggregate {
	name := b.Labels[0]
	if d := checkIdent(name, "Aggregate name", b.LabelRanges[0]); d != nil {
		c.diags = append(c.diags, d)
		return nil
	}
	if vs.has(name) {
		c.errorf(b.LabelRanges[0], "Name already bound", "%q is already bound in this rule; an aggregate binds a new name.", name)
		return nil
	}
	content, diags := b.Body.Content(aggregateSchema)
	c.diags = append(c.diags, diags...)
	return c.aggregateBody(name, b, content, vs)
}

// aggregateBody compiles an aggregate's content in vs and declares its
// name there.
func (c *compiler) aggregateBody(name string, b *hcl.Block, content *hcl.BodyContent, vs *vars) *Aggregate {
	content, absents := c.overRelation(content)
	sub := vs.clone()
	ag := &Aggregate{Name: name, Range: b.DefRange}
	ag.Body = c.scope(content, sub, false, absents...)
	if len(ag.Body.Match) == 0 {
		c.errorf(b.DefRange, "Empty aggregate", "Aggregate %q has no match block: it needs patterns to count or sum over.", name)
	}
	if a := content.Attributes["where"]; a != nil {
		ag.Where = c.expr(a, sub, "a boolean CEL condition", boolOnly)
		ag.Body.Hints = valueHints(ag.Where, stringAliases(ag.Body))
	}
	var fns []*hcl.Attribute
	for _, f := range []string{"count", "sum", "min", "max"} {
		if a := content.Attributes[f]; a != nil {
			fns = append(fns, a)
		}
	}
	if len(fns) != 1 {
		c.errorf(b.DefRange, "Aggregate function", "Aggregate %q needs exactly one of count = true, sum = \"expr\", min = \"expr\" or max = \"expr\".", name)
		vs.add(name, cel.DynType)
		return nil
	}
	if g := content.Attributes["guard"]; g != nil {
		v, d := g.Expr.Value(nil)
		if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.Bool {
			c.errorf(g.Expr.Range(), "Expected a bool", "Write guard = true: a firing that read aggregate %q then commits only if what it counted still stands.", name)
		} else {
			ag.Guard = v.True()
		}
	}
	a := fns[0]
	ag.Func = a.Name
	if a.Name == "count" {
		v, d := a.Expr.Value(nil)
		if d.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type().FriendlyName() != "bool" || !v.True() {
			c.errorf(a.Expr.Range(), "Expected true", "Write count = true: count counts the bindings that pass where.")
		}
		ag.Type = cel.IntType
	} else {
		ag.Of = c.expr(a, sub, "a numeric CEL expression", numeric)
		ag.Type = cel.DynType
		if ag.Of != nil {
			ag.Type = ag.Of.Type
		}
		if a.Name != "sum" {
			ag.Type = cel.OptionalType(ag.Type)
		}
	}
	vs.add(name, ag.Type)
	dropUnread(ag)
	return ag
}

// dropUnread takes out of an aggregate's body the optional patterns whose
// alias neither its where nor its of reads, such as the health of a
// relation's instances to a count of the placed ones: such a fact changes
// no member's contribution, so it is neither read nor followed. (A count
// over ["live", "spec"] that reads only the state then is not adjusted, nor
// its readers evaluated again, when an agent reports an image or a health.)
func dropUnread(ag *Aggregate) {
	read := map[string]bool{}
	for _, x := range []*Expr{ag.Where, ag.Of} {
		if x != nil && x.AST != nil {
			maps.Copy(read, Idents(x.AST.NativeRep().Expr()))
		}
	}
	sc := ag.Body
	for _, ps := range [][]*Pattern{sc.Match, sc.Optional, sc.Absent} {
		for _, p := range ps {
			for _, v := range p.Vars() {
				read[v] = true
			}
		}
	}
	kept := sc.Optional[:0:0]
	for _, p := range sc.Optional {
		if read[p.Alias] {
			kept = append(kept, p)
			continue
		}
		sc.Binds = slices.DeleteFunc(sc.Binds, func(v string) bool { return v == p.Alias })
	}
	if len(kept) == len(sc.Optional) {
		return
	}
	sc.Optional = kept
	// Outer lists what the remaining patterns use of the names around them.
	used := map[string]bool{}
	for _, ps := range [][]*Pattern{sc.Match, sc.Optional, sc.Absent} {
		for _, p := range ps {
			for _, v := range append(p.Vars(), p.Alias) {
				used[v] = true
			}
		}
	}
	sc.Outer = slices.DeleteFunc(sc.Outer, func(v string) bool { return !used[v] })
}

func (c *compiler) choice(b *hcl.Block, vs *vars) *Choice {
	ch := &Choice{Name: b.Labels[0], Range: b.DefRange}
	content, diags := b.Body.Content(chooseSchema)
	c.diags = append(c.diags, diags...)
	// Candidates may be a relation's: over = ["live", "spec"] makes the
	// candidates the placed instances the shared lets speak of.
	content, absents := c.overRelation(content)
	before := vs.clone()
	ch.Body = c.scope(content, vs, true, absents...)
	if len(ch.Body.Match) == 0 {
		c.errorf(b.DefRange, "Empty choice", "choose %q has no match block: it needs patterns that enumerate the candidates.", ch.Name)
	}
	// The tie-break orders candidates by their own path variables (the
	// node's name, not its cpu); aliases only when there is no path variable.
	for _, p := range ch.Body.Match {
		for _, v := range p.Vars() {
			if !before.has(v) {
				ch.Vars = appendUnique(ch.Vars, v)
			}
		}
	}
	if len(ch.Vars) == 0 {
		for _, v := range ch.Body.Binds {
			if !before.has(v) {
				ch.Vars = append(ch.Vars, v)
			}
		}
	}
	sort.Strings(ch.Vars)
	var inls []inline
	for _, fb := range content.Blocks.OfType("filters") {
		as, d := attrs(fb.Body)
		c.diags = append(c.diags, d...)
		for _, a := range as {
			if e, inl := c.exprInlines(a, vs, "a boolean CEL filter", boolOnly); e != nil {
				ch.Filters = append(ch.Filters, &Filter{Name: a.Name, Expr: e})
				inls = append(inls, inl...)
			}
		}
	}
	ch.Pass = c.conjunction(ch.Filters, inls, vs)
	if a := content.Attributes["score"]; a != nil {
		ch.Score = c.expr(a, vs, "a numeric CEL score", numeric)
	}
	if a := content.Attributes["order"]; a != nil {
		if content.Attributes["score"] != nil {
			c.errorf(a.NameRange, "Both order and score", "choose %q has both order and score; a choice ranks its candidates by one of them: order is a list of sort keys, score one number.", ch.Name)
		}
		ch.Order = c.orderKeys(a, vs)
	}
	if a := content.Attributes["pick"]; a != nil {
		// Over the rule's binding, not a candidate's: how many to pick is
		// decided before any candidate is looked at.
		ch.Pick = c.expr(a, before, "an int CEL expression (how many candidates to pick)", intOnly)
	}
	ch.Exact = ch.Score == nil || ch.Order != nil || ch.Pick != nil
	if a := content.Attributes["exact"]; a != nil {
		v, d := a.Expr.Value(nil)
		if d.HasErrors() || v.Type() != cty.Bool || !v.IsKnown() || v.IsNull() {
			c.errorf(a.Expr.Range(), "Invalid exact", "exact takes true or false: true scores every candidate that passes the filters, never a sample.")
		} else if v.True() {
			ch.Exact = true
		}
	}
	if a := content.Attributes["candidates"]; a != nil {
		v, d := a.Expr.Value(nil)
		n, ok := 0, false
		if !d.HasErrors() && v.Type() == cty.Number && v.IsKnown() && !v.IsNull() {
			if bf := v.AsBigFloat(); bf.IsInt() {
				i, _ := bf.Int64()
				n, ok = int(i), i >= 1 && i <= 1<<20
			}
		}
		if !ok {
			c.errorf(a.Expr.Range(), "Invalid candidates", "candidates takes a whole number of at least 1, such as 64: how many candidates that pass the filters are scored.")
		} else {
			ch.Candidates = n
		}
	}
	return ch
}

// conjunction compiles every filter in one program, `(f1) && (f2) && ...`,
// which a choice evaluates first (Choice.Pass). It is nil with fewer than
// two filters, or when one of them or the conjunction has no Fast program:
// the conjunction of programs that count their cost would count it again.
func (c *compiler) conjunction(fs []*Filter, inls []inline, vs *vars) *Expr {
	if len(fs) < 2 {
		return nil
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		if f.Expr.Fast == nil {
			return nil
		}
		parts[i] = "(" + f.Expr.Src + "\n)" // a line comment ends before the parenthesis
	}
	var inl []inline
	seen := map[string]bool{}
	for _, l := range inls {
		if !seen[l.name] {
			seen[l.name] = true
			inl = append(inl, l)
		}
	}
	src := strings.Join(parts, " && ")
	comp, err := c.cache.compileInlined(c.envs, vs, src, c.costLimit, inl)
	if err != nil || comp.issues != nil || comp.fast == nil {
		return nil // each filter alone, as always
	}
	return &Expr{Src: src, Range: fs[0].Expr.Range, Program: comp.prog, Fast: comp.fast, Type: comp.out, AST: comp.ast}
}

// orderKeys compiles a choice's order: a list whose elements are CEL
// strings (ascending) or asc("expr") / desc("expr"), most significant
// first, as SQL's ORDER BY reads.
func (c *compiler) orderKeys(a *hcl.Attribute, vs *vars) []*OrderKey {
	keys, ok := sortKeys(a.Expr)
	if !ok || len(keys) == 0 {
		c.errorf(a.Expr.Range(), "Expected a list of sort keys", "order takes a non-empty list of sort keys, most significant first, such as [desc(\"state == 'pending'\"), \"started\"]: a CEL string sorts ascending, asc(\"...\") and desc(\"...\") say the direction.")
		return nil
	}
	var out []*OrderKey
	for _, sk := range keys {
		k := &OrderKey{}
		if call := sk.call; call != nil {
			switch {
			case call.Name != "asc" && call.Name != "desc":
				detail := fmt.Sprintf("%s(...) is not a sort direction; write asc(\"expr\") or desc(\"expr\").", call.Name)
				if n, ok := Closest(call.Name, []string{"asc", "desc"}); ok {
					detail += fmt.Sprintf(" Did you mean %s?", n)
				}
				c.errorf(call.NameRange, "Unknown sort direction", "%s", detail)
				continue
			case sk.arg == nil:
				c.errorf(call.ArgsRange, "Expected one sort key", "%s takes one CEL string, such as %s(\"started\").", call.Name, call.Name)
				continue
			}
			k.Desc = call.Name == "desc"
		}
		k.Expr = c.expr(&hcl.Attribute{Name: "order", Expr: sk.arg, Range: sk.arg.Range(), NameRange: a.NameRange}, vs,
			"a sort key (a bool, number, string, timestamp or duration)", orderable)
		if k.Expr != nil {
			out = append(out, k)
		}
	}
	return out
}

// sortKey is one key of an order as written: its CEL string, and the
// call around it when there is one (asc or desc; orderKeys reports any
// other name). arg is nil for a call without exactly one argument.
type sortKey struct {
	arg  hcl.Expression
	call *hcl.StaticCall
}

// sortKeys splits an order's list into its keys, for orderKeys and for
// the shared aggregates its strings read (usesOf); ok is false when the
// expression is not a list.
func sortKeys(e hcl.Expression) (keys []sortKey, ok bool) {
	exprs, d := hcl.ExprList(e)
	if d.HasErrors() {
		return nil, false
	}
	for _, x := range exprs {
		k := sortKey{arg: x}
		if call, d := hcl.ExprCall(x); !d.HasErrors() {
			k.arg, k.call = nil, call
			if len(call.Arguments) == 1 {
				k.arg = call.Arguments[0]
			}
		}
		keys = append(keys, k)
	}
	return keys, true
}

// orderable reports whether values of t compare with each other.
func orderable(t *cel.Type) bool {
	switch t.Kind() {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.StringKind,
		types.TimestampKind, types.DurationKind, types.DynKind:
		return true
	}
	return false
}

func (c *compiler) fresh(b *hcl.Block, vs *vars) *Fresh {
	f := &Fresh{Var: b.Labels[0], Range: b.DefRange}
	if d := checkIdent(f.Var, "Fresh variable", b.LabelRanges[0]); d != nil {
		c.diags = append(c.diags, d)
		return nil
	}
	if vs.has(f.Var) {
		c.errorf(b.LabelRanges[0], "Name already bound", "%q is already bound; fresh binds a new id variable.", f.Var)
		return nil
	}
	content, diags := b.Body.Content(freshSchema)
	c.diags = append(c.diags, diags...)
	if a := content.Attributes["count"]; a != nil {
		f.Count = c.expr(a, vs, "an int CEL expression", intOnly)
	}
	vs.add(f.Var, cel.StringType)
	return f
}

func (c *compiler) head(b *hcl.Block, k HeadKind, vs *vars) *Head {
	s := strLit{val: b.Labels[0], rng: b.LabelRanges[0], start: -1, src: c.src}
	if r := b.LabelRanges[0]; r.Start.Byte+1 < len(c.src) && r.End.Byte <= len(c.src) &&
		string(c.src[r.Start.Byte+1:r.End.Byte-1]) == s.val {
		s.start = r.Start.Byte + 1
	}
	segs, d := parseTemplate(s, "a key template")
	if d != nil {
		c.diags = append(c.diags, d...)
		return nil
	}
	h := &Head{Kind: k, Template: s.val, Segs: segs, Range: s.rng}
	if h.Type = resolveType(c.schema, segs); h.Type == nil {
		c.diags = append(c.diags, unknownKeyForm(c.schema, s, segs))
		return nil
	}
	off := 0
	for _, sg := range segs {
		n := len(sg.Lit)
		if sg.Var != "" {
			n = len(sg.Var) + 2
			if !vs.has(sg.Var) {
				names := append([]string(nil), vs.names...)
				detail := fmt.Sprintf("{%s} in the head %q is bound by no pattern, choice or fresh id of the rule.", sg.Var, s.val)
				if n, ok := Closest(sg.Var, names); ok {
					detail += fmt.Sprintf(" Did you mean {%s}?", n)
				}
				c.errorf(s.rangeAt(off, len(sg.Var)+2), "Unbound variable in head", "%s", detail)
			} else if t := vs.types[sg.Var]; t.Kind() != types.StringKind {
				c.errorf(s.rangeAt(off, len(sg.Var)+2), "Head variable type", "{%s} is a %s; a key segment must be a string (use string(%s) in a let).", sg.Var, t, sg.Var)
			}
		}
		off += n + 1
	}
	if k == Delete {
		_, diags := b.Body.Content(emptySchema)
		c.diags = append(c.diags, diags...)
		return h
	}
	content, diags := b.Body.Content(valueSchema)
	c.diags = append(c.diags, diags...)
	a := content.Attributes["value"]
	if a == nil {
		return nil
	}
	kind := h.Type.Value.Kind
	h.Value = c.expr(a, vs, fmt.Sprintf("a CEL expression giving %s", h.Type.Value.Describe()), func(t *cel.Type) bool { return accepts(kind, t) })
	if h.Value == nil {
		return nil
	}
	return h
}

func boolOnly(t *cel.Type) bool {
	return t.Kind() == types.BoolKind || t.Kind() == types.DynKind
}

func numeric(t *cel.Type) bool {
	k := t.Kind()
	return k == types.IntKind || k == types.DoubleKind || k == types.UintKind || k == types.DynKind
}

func intOnly(t *cel.Type) bool {
	return t.Kind() == types.IntKind || t.Kind() == types.DynKind
}

// expr compiles a CEL attribute in the environment vs; want checks the
// output type (nil: any). Errors are mapped to the file's line and column.
func (c *compiler) expr(a *hcl.Attribute, vs *vars, what string, want func(*cel.Type) bool) *Expr {
	e, _ := c.exprInlines(a, vs, what, want)
	return e
}

// exprInlines is expr that also returns the shared lets inlined into the
// expression, for an expression inlined in turn (an action's param).
func (c *compiler) exprInlines(a *hcl.Attribute, vs *vars, what string, want func(*cel.Type) bool) (*Expr, []inline) {
	s, d := stringOf(a.Expr, c.src, what)
	if d != nil {
		c.diags = append(c.diags, d...)
		return nil, nil
	}
	inl, bad, dg := c.inlines(s, vs, nil)
	c.diags = append(c.diags, dg...)
	bound := vs
	if len(bad) > 0 {
		// Reported at their use: the rest of the expression is still checked.
		vs = vs.clone()
		for _, n := range bad {
			vs.add(n, cel.DynType)
		}
	}
	comp, err := c.cache.compileInlined(c.envs, vs, s.val, c.costLimit, inl)
	if err != nil {
		c.errorf(s.rng, "CEL environment", "Building the CEL environment for %s failed: %v.", a.Name, err)
		return nil, nil
	}
	if comp.issues != nil {
		for _, e := range comp.issues.Errors() {
			off := s.offsetOf(e.Location.Line(), e.Location.Column())
			rng := s.rangeAt(off, 1)
			summary := "CEL type error"
			if strings.HasPrefix(e.Message, "Syntax error") {
				summary = "CEL syntax error"
			}
			detail := e.Message
			if m := undeclaredRE.FindStringSubmatch(e.Message); m != nil {
				detail += fmt.Sprintf(". Names bound here: %s.", strings.Join(c.boundNames(bound), ", ")) + c.undeclared(m[1], bound)
			}
			where := fmt.Sprintf("In %s = %q", a.Name, s.val)
			if strings.Contains(s.val, "\n") || len(s.val) > maxQuoted {
				where = "In " + a.Name // the caret shows the line
			}
			c.diags = append(c.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
				Detail: fmt.Sprintf("%s: %s", where, detail), Subject: &rng, Context: &s.rng})
		}
		return nil, nil
	}
	if len(bad) > 0 {
		return nil, nil
	}
	if want != nil && !want(comp.out) {
		c.errorf(s.rng, "CEL type error", "%s = %s has type %s; expected %s.", a.Name, quoteShort(s.val), comp.out, what)
		return nil, nil
	}
	return &Expr{Src: s.val, Range: s.rng, Program: comp.prog, Fast: comp.fast, Type: comp.out, AST: comp.ast}, inl
}

// maxQuoted is the longest expression a diagnostic's detail repeats whole;
// the snippet under the headline shows where a longer one went wrong.
const maxQuoted = 200

// quoteShort quotes an expression for a detail, cut after maxQuoted bytes.
func quoteShort(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}

// boundNames lists the names an expression may read: those of vs, and
// the params of the action being compiled.
func (c *compiler) boundNames(vs *vars) []string {
	out := sortedNames(vs)
	for n := range c.args {
		if !vs.has(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func sortedNames(vs *vars) []string {
	out := append([]string{NowVar}, vs.names...)
	sort.Strings(out)
	return out
}
