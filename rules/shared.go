package rules

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Shared definitions: the top-level aggregate, relation, let and const
// blocks of a rule set. Every rule of the set may use one by name:
//
//   - a named aggregate is written into the scope of each rule whose
//     expressions read it, grouped by its params; rules that bind the params
//     to values of the same types share one compiled aggregate, so the
//     evaluator computes its groups once for all of them;
//   - a relation is a named set of patterns an aggregate extends (over);
//   - a let is a CEL expression over the names of the place it is used,
//     inlined there; a const is a let that reads no name.
//
// A rule's own names shadow shared ones.

// sharedAggregateSchema is an aggregate's schema with what a top-level one
// adds: a doc string and the params it is grouped by.
var sharedAggregateSchema = &hcl.BodySchema{
	Attributes: append([]hcl.AttributeSchema{{Name: "doc"}, {Name: "params"}}, aggregateSchema.Attributes...),
	Blocks:     aggregateSchema.Blocks,
}

// countsSchema is what a counts block has besides its counts: one
// attribute per count, its where condition.
// Its patterns come from the relations it is over, and its own match and
// optional blocks, as an aggregate's do.
var countsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "params"}, {Name: "absent"}, {Name: "over", Required: true}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "match"}, {Type: "optional"}},
}

var relationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "absent"}, {Name: "over"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "match"}, {Type: "optional"}},
}

// defs are the shared definitions of a rule set, by name.
type defs struct {
	aggs map[string]*aggDef
	rels map[string]*relDef
	lets map[string]*letDef
	acts map[string]*actDef // shared actions (action.go)
	srcs map[string][]byte  // every file's source, for positions in a definition

	inlined map[string]inlined // lets compiled, by name and environment
}

func newDefs() *defs {
	return &defs{aggs: map[string]*aggDef{}, rels: map[string]*relDef{}, lets: map[string]*letDef{}, acts: map[string]*actDef{}, srcs: map[string][]byte{}, inlined: map[string]inlined{}}
}

// def is what every kind of definition has.
type def struct {
	name string
	kind string    // aggregate, relation, let, const
	rng  hcl.Range // the name
	used bool
}

type aggDef struct {
	def
	block   *hcl.Block
	content *hcl.BodyContent
	params  []string
	file    string
	memo    map[string]*Aggregate // compiled, by the params' types; nil when it did not compile
}

type relDef struct {
	def
	content *hcl.BodyContent
}

type letDef struct {
	def
	expr strLit
}

// names lists every definition's name, for "did you mean".
func (d *defs) names() []string {
	var out []string
	for n := range d.aggs {
		out = append(out, n)
	}
	for n := range d.rels {
		out = append(out, n)
	}
	for n := range d.lets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (d *defs) lookup(name string) *def {
	if a := d.aggs[name]; a != nil {
		return &a.def
	}
	if r := d.rels[name]; r != nil {
		return &r.def
	}
	if l := d.lets[name]; l != nil {
		return &l.def
	}
	return nil
}

// collect records the definitions of one file's top-level blocks.
func (c *compiler) collect(blocks hcl.Blocks) {
	d := c.defs
	d.srcs[c.file] = c.src
	declare := func(name, kind string, rng hcl.Range) bool {
		if dg := checkIdent(name, "Definition name", rng); dg != nil {
			dg.Summary = "Invalid definition name"
			c.diags = append(c.diags, dg)
			return false
		}
		old := d.lookup(name)
		if a := d.acts[name]; a != nil {
			old = &a.def
		}
		if old != nil {
			c.errorf(rng, "Duplicate definition", "%q is already defined as a shared %s at %s; a rule set defines each name once.", name, old.kind, old.rng)
			return false
		}
		return true
	}
	for _, b := range blocks {
		switch b.Type {
		case "aggregate":
			name, rng := b.Labels[0], b.LabelRanges[0]
			content, diags := b.Body.Content(sharedAggregateSchema)
			c.diags = append(c.diags, diags...)
			if !declare(name, "aggregate", rng) {
				continue
			}
			d.aggs[name] = c.aggDef(b, content, c.params(content))
		case "counts":
			// Several counts over the same patterns, one where each: each is
			// a shared aggregate of its own.
			content, _, diags := b.Body.PartialContent(countsSchema)
			c.diags = append(c.diags, diags...)
			as := c.countAttrs(b.Body)
			params := c.params(content)
			if len(as) == 0 {
				c.errorf(b.DefRange, "Empty counts", "A counts block names at least one count: name = \"condition\", such as waiting = \"state == 'pending'\".")
			}
			for _, a := range as {
				if !declare(a.Name, "aggregate", a.NameRange) {
					continue
				}
				one := &hcl.BodyContent{Blocks: content.Blocks, MissingItemRange: content.MissingItemRange, Attributes: hcl.Attributes{}}
				for k, v := range content.Attributes {
					one.Attributes[k] = v
				}
				one.Attributes["where"] = a
				one.Attributes["count"] = &hcl.Attribute{Name: "count", Expr: &hclsyntax.LiteralValueExpr{Val: cty.True, SrcRange: a.NameRange}, Range: a.Range, NameRange: a.NameRange}
				blk := &hcl.Block{Type: "aggregate", Labels: []string{a.Name}, DefRange: a.Range, LabelRanges: []hcl.Range{a.NameRange}}
				d.aggs[a.Name] = c.aggDef(blk, one, params)
			}
		case "action":
			if declare(b.Labels[0], "action", b.LabelRanges[0]) {
				d.acts[b.Labels[0]] = c.actionDef(b)
			}
		case "relation":
			name, rng := b.Labels[0], b.LabelRanges[0]
			content, diags := b.Body.Content(relationSchema)
			c.diags = append(c.diags, diags...)
			if !declare(name, "relation", rng) {
				continue
			}
			if len(content.Blocks) == 0 && content.Attributes["over"] == nil && content.Attributes["absent"] == nil {
				c.errorf(b.DefRange, "Empty relation", "Relation %q has no patterns: a relation names the patterns an aggregate counts over.", name)
			}
			d.rels[name] = &relDef{def: def{name: name, kind: "relation", rng: rng}, content: content}
		case "let", "const":
			as, diags := attrs(b.Body)
			c.diags = append(c.diags, diags...)
			for _, a := range as {
				if !declare(a.Name, b.Type, a.NameRange) {
					continue
				}
				var s strLit
				if b.Type == "let" {
					var dg hcl.Diagnostics
					if s, dg = stringOf(a.Expr, c.src, "a CEL expression"); dg != nil {
						c.diags = append(c.diags, dg...)
						continue
					}
				} else if s = c.constant(a); s.val == "" {
					continue
				}
				d.lets[a.Name] = &letDef{def: def{name: a.Name, kind: b.Type, rng: a.NameRange}, expr: s}
			}
		}
	}
}

// countAttrs returns a counts block's counts in source order: its
// attributes other than the schema's. A block other than the schema's is
// an error.
func (c *compiler) countAttrs(body hcl.Body) []*hcl.Attribute {
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return nil
	}
	for _, b := range sb.Blocks {
		if b.Type != "match" && b.Type != "optional" {
			c.errorf(b.TypeRange, "Unexpected block", "A counts block has match and optional blocks, and one count per attribute; %q belongs elsewhere.", b.Type)
		}
	}
	var out []*hcl.Attribute
	for name, a := range sb.Attributes {
		if !slices.ContainsFunc(countsSchema.Attributes, func(s hcl.AttributeSchema) bool { return s.Name == name }) {
			out = append(out, a.AsHCLAttribute())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Range.Start.Byte < out[j].Range.Start.Byte })
	return out
}

// aggDef records a shared aggregate of this file.
func (c *compiler) aggDef(b *hcl.Block, content *hcl.BodyContent, params []string) *aggDef {
	return &aggDef{def: def{name: b.Labels[0], kind: "aggregate", rng: b.LabelRanges[0]}, block: b, content: content,
		params: params, file: c.file, memo: map[string]*Aggregate{}}
}

// params reads a shared aggregate's params: the names it is grouped by.
func (c *compiler) params(content *hcl.BodyContent) []string {
	var out []string
	if a := content.Attributes["params"]; a != nil {
		ps, rngs := c.stringList(a, "variable names such as [\"svc\"]")
		for i, p := range ps {
			if dg := checkIdent(p, "Param", rngs[i]); dg != nil {
				c.diags = append(c.diags, dg)
				continue
			}
			out = appendUnique(out, p)
		}
	}
	return out
}

// constant turns a const attribute's literal into CEL source: a whole
// number is an int, another number a double, a string a string.
func (c *compiler) constant(a *hcl.Attribute) strLit {
	v, diags := a.Expr.Value(nil)
	s := strLit{rng: a.Expr.Range(), start: -1, src: c.src}
	if !diags.HasErrors() && v.IsKnown() && !v.IsNull() {
		switch v.Type() {
		case cty.Number:
			bf := v.AsBigFloat()
			if bf.IsInt() {
				if i, acc := bf.Int64(); acc == 0 {
					s.val = strconv.FormatInt(i, 10)
				}
			} else if f, _ := bf.Float64(); f == f {
				s.val = strconv.FormatFloat(f, 'g', -1, 64)
				if !strings.ContainsAny(s.val, ".eEn") {
					s.val += ".0"
				}
			}
		case cty.Bool:
			s.val = strconv.FormatBool(v.True())
		case cty.String:
			s.val = strconv.Quote(v.AsString())
		}
	}
	if s.val == "" {
		c.errorf(a.Expr.Range(), "Invalid const", "const %s takes a literal number, string or bool, such as 0.55; an expression over names is a let.", a.Name)
		return s
	}
	// A const reads no name: checked once, here.
	if comp, err := c.cache.compile(c.envs, newVars(), s.val, c.costLimit); err != nil || comp.issues != nil {
		c.errorf(a.Expr.Range(), "Invalid const", "const %s = %s is not a CEL literal.", a.Name, s.val)
		s.val = ""
	}
	return s
}

// stringList reads a list of strings with each one's range.
func (c *compiler) stringList(a *hcl.Attribute, what string) ([]string, []hcl.Range) {
	exprs, diags := hcl.ExprList(a.Expr)
	if diags.HasErrors() {
		c.errorf(a.Expr.Range(), "Expected a list", "Expected a list of %s.", what)
		return nil, nil
	}
	var out []string
	var rngs []hcl.Range
	for _, e := range exprs {
		s, d := stringOf(e, c.src, "one of "+what)
		if d != nil {
			c.diags = append(c.diags, d...)
			continue
		}
		out = append(out, s.val)
		rngs = append(rngs, e.Range())
	}
	return out, rngs
}

// uses is what one rule reads of the shared definitions.
type uses struct {
	refs     map[string]bool // shared names its expressions read, directly or through a definition
	declared map[string]bool // names the rule declares itself: they shadow shared ones
	placed   map[string]bool // shared aggregates already in one of its scopes
}

// skipAttrs are the attributes that hold no CEL.
var skipAttrs = map[string]bool{"doc": true, "principal": true, "after": true, "absent": true, "over": true, "params": true, "candidates": true}

// usesOf finds the shared definitions a rule reads: every CEL string of
// the block is parsed for its identifiers, and what a definition reads is
// followed in turn.
func (c *compiler) usesOf(block *hcl.Block) *uses {
	u := &uses{refs: map[string]bool{}, declared: map[string]bool{}, placed: map[string]bool{}}
	if len(c.defs.aggs)+len(c.defs.lets) == 0 {
		return u
	}
	body, ok := block.Body.(*hclsyntax.Body)
	if !ok {
		return u
	}
	var queue []string
	read := func(src string) {
		for id := range c.identsOf(src) {
			if !u.refs[id] && c.defs.lookup(id) != nil {
				u.refs[id] = true
				queue = append(queue, id)
			}
		}
	}
	var walk func(b *hclsyntax.Body, blockType string)
	walk = func(b *hclsyntax.Body, blockType string) {
		for name, a := range b.Attributes {
			switch {
			case blockType == "match" || blockType == "optional":
				u.declared[name] = true
				continue
			case blockType == "let":
				u.declared[name] = true
			case skipAttrs[name]:
				continue
			case name == "order" && blockType == "choose":
				// A list of sort keys, each a CEL string or asc/desc of one.
				keys, _ := sortKeys(a.Expr)
				for _, k := range keys {
					if k.arg == nil {
						continue // orderKeys reports it
					}
					if s, d := stringOf(k.arg, c.src, ""); d == nil {
						read(s.val)
					}
				}
				continue
			}
			if s, d := stringOf(a.Expr, c.src, ""); d == nil {
				read(s.val)
			}
		}
		for _, sb := range b.Blocks {
			if sb.Type == "aggregate" && len(sb.Labels) == 1 {
				u.declared[sb.Labels[0]] = true
			}
			if sb.Type == "do" && len(sb.Labels) == 1 && c.defs.acts[sb.Labels[0]] != nil {
				ad := c.defs.acts[sb.Labels[0]]
				// The action's heads are read where the rule takes it; its
				// params are the do block's attributes, read below.
				for _, src := range c.defs.actionReads(ad) {
					for id := range c.identsOf(src) {
						if !slices.Contains(ad.params, id) && !u.refs[id] && c.defs.lookup(id) != nil {
							u.refs[id] = true
							queue = append(queue, id)
						}
					}
				}
			}
			walk(sb.Body, sb.Type)
		}
	}
	walk(body, "rule")
	for n := range u.declared {
		delete(u.refs, n)
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if u.declared[n] {
			continue
		}
		if l := c.defs.lets[n]; l != nil {
			read(l.expr.val)
		}
		if a := c.defs.aggs[n]; a != nil {
			// Read, even where it cannot be placed: its use is reported, not
			// its definition as unused.
			a.used = true
			c.markRelations(a.content.Attributes["over"], c.defs.srcs[a.file])
			for _, k := range []string{"where", "sum", "min", "max"} {
				if at := a.content.Attributes[k]; at != nil {
					if s, d := stringOf(at.Expr, c.defs.srcs[a.file], ""); d == nil {
						read(s.val)
					}
				}
			}
		}
	}
	return u
}

// identsOf returns the identifiers a CEL expression reads (nil when it
// does not parse: compiling it reports why).
func (c *compiler) identsOf(src string) map[string]bool {
	env, err := base()
	if err != nil {
		return nil
	}
	a, iss := env.Parse(src)
	if iss != nil && iss.Err() != nil {
		return nil
	}
	return Idents(a.NativeRep().Expr())
}

// Idents returns the identifiers an expression reads, comprehension
// variables included.
func Idents(x ast.Expr) map[string]bool {
	out := map[string]bool{}
	var walk func(x ast.Expr)
	walk = func(x ast.Expr) {
		switch x.Kind() {
		case ast.IdentKind:
			out[x.AsIdent()] = true
		case ast.SelectKind:
			walk(x.AsSelect().Operand())
		case ast.CallKind:
			c := x.AsCall()
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, a := range c.Args() {
				walk(a)
			}
		case ast.ListKind:
			for _, el := range x.AsList().Elements() {
				walk(el)
			}
		case ast.MapKind:
			for _, en := range x.AsMap().Entries() {
				me := en.AsMapEntry()
				walk(me.Key())
				walk(me.Value())
			}
		case ast.ComprehensionKind:
			c := x.AsComprehension()
			for _, y := range []ast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()} {
				walk(y)
			}
		}
	}
	walk(x)
	return out
}

// placeShared adds to a rule scope the shared aggregates the rule reads
// whose params are all bound there: in the body when it can (computed once
// per binding), else in the choice (once per candidate).
func (c *compiler) placeShared(sc *Scope, vs *vars) {
	if c.uses == nil {
		return
	}
	var names []string
	for n := range c.uses.refs {
		if c.defs.aggs[n] != nil && !c.uses.placed[n] && !vs.has(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		ad := c.defs.aggs[n]
		ready := true
		for _, p := range ad.params {
			ready = ready && vs.has(p)
		}
		if !ready {
			continue
		}
		c.uses.placed[n] = true
		ad.used = true
		if ag := c.sharedAggregate(ad, vs); ag != nil {
			sc.Aggregates = append(sc.Aggregates, ag)
			vs.add(n, ag.Type)
		} else {
			vs.add(n, cel.DynType) // reported at the definition
		}
	}
}

// sharedAggregate compiles a shared aggregate for the params' types in vs,
// once per distinct set of types: rules that bind them alike share it.
// It sees only its params: its other names are its own, whatever the rule
// binds under the same names.
func (c *compiler) sharedAggregate(ad *aggDef, vs *vars) *Aggregate {
	own := newVars()
	for _, p := range ad.params {
		own.add(p, vs.types[p])
	}
	sig := own.signature()
	if ag, ok := ad.memo[sig]; ok {
		return ag
	}
	dc := &compiler{loader: c.loader, file: ad.file, src: c.defs.srcs[ad.file], defs: c.defs, shared: ad}
	ag := dc.aggregateBody(ad.name, ad.block, ad.content, own)
	if ag != nil {
		ag.Params = append([]string{}, ad.params...) // never nil: shared
		if dc.diags.HasErrors() {
			ag = nil
		}
	}
	if len(ad.memo) == 0 || dc.diags.HasErrors() {
		c.diags = append(c.diags, dc.diags...) // once, not again for every rule that reads it
	}
	ad.memo[sig] = ag
	return ag
}

// overRelation merges the patterns of the relations an aggregate extends
// (over = "name" or a list of names, and what those extend) into its
// content.
func (c *compiler) overRelation(content *hcl.BodyContent) (*hcl.BodyContent, []*hcl.Attribute) {
	a := content.Attributes["over"]
	if a == nil {
		return content, nil
	}
	merged := &hcl.BodyContent{Attributes: content.Attributes, Blocks: append(hcl.Blocks(nil), content.Blocks...), MissingItemRange: content.MissingItemRange}
	var absents []*hcl.Attribute
	seen := map[string]bool{}
	var extend func(a *hcl.Attribute, src []byte)
	extend = func(a *hcl.Attribute, src []byte) {
		exprs := []hcl.Expression{a.Expr}
		if l, d := hcl.ExprList(a.Expr); !d.HasErrors() {
			exprs = l
		}
		for _, e := range exprs {
			s, d := stringOf(e, src, "a relation name, or a list of them")
			if d != nil {
				c.diags = append(c.diags, d...)
				continue
			}
			rel := c.defs.rels[s.val]
			if rel == nil {
				detail := fmt.Sprintf("No relation %q is defined in the rule set.", s.val)
				if n, ok := Closest(s.val, slices.Sorted(maps.Keys(c.defs.rels))); ok {
					detail += fmt.Sprintf(" Did you mean %q?", n)
				}
				c.errorf(e.Range(), "Unknown relation", "%s", detail)
				continue
			}
			if seen[s.val] {
				continue // reached twice (a cycle, or two paths): its patterns once
			}
			seen[s.val] = true
			rel.used = true
			merged.Blocks = append(merged.Blocks, rel.content.Blocks...)
			if ab := rel.content.Attributes["absent"]; ab != nil {
				absents = append(absents, ab)
			}
			if o := rel.content.Attributes["over"]; o != nil {
				extend(o, c.srcOf(o.Range))
			}
		}
	}
	extend(a, c.src)
	return merged, absents
}

// markRelations marks the relations an over attribute names, and what
// they extend, as used.
func (c *compiler) markRelations(a *hcl.Attribute, src []byte) {
	if a == nil {
		return
	}
	exprs := []hcl.Expression{a.Expr}
	if l, d := hcl.ExprList(a.Expr); !d.HasErrors() {
		exprs = l
	}
	for _, e := range exprs {
		if s, d := stringOf(e, src, ""); d == nil {
			if rel := c.defs.rels[s.val]; rel != nil && !rel.used {
				rel.used = true
				o := rel.content.Attributes["over"]
				if o != nil {
					c.markRelations(o, c.srcOf(o.Range))
				}
			}
		}
	}
}

// srcOf returns the source of the file a range is in: a relation's
// patterns may come from another file than the aggregate that extends it.
func (c *compiler) srcOf(rng hcl.Range) []byte {
	if c.defs != nil && rng.Filename != c.file {
		if src, ok := c.defs.srcs[rng.Filename]; ok {
			return src
		}
	}
	return c.src
}

// inlines compiles the shared lets an expression reads that vs does not
// bind, each in the same environment (its own lets first), to be inlined
// into the expression. A let that does not compile there is reported at
// the expression's use of it and left out of the list, in bad.
func (c *compiler) inlines(s strLit, vs *vars, stack []string) (out []inline, bad []string, diags hcl.Diagnostics) {
	if c.defs == nil || len(c.defs.lets)+len(c.args) == 0 {
		return nil, nil, nil
	}
	var names, params []string
	for id := range c.identsOf(s.val) {
		if _, ok := c.args[id]; ok {
			// An action's param, compiled where the rule gave it: it
			// shadows the rule's names and the shared ones.
			params = append(params, id)
		} else if l := c.defs.lets[id]; l != nil && !vs.has(id) {
			names = append(names, id)
		}
	}
	sort.Strings(params)
	for _, n := range params {
		out = append(out, c.args[n])
	}
	sort.Strings(names)
	for _, n := range names {
		l := c.defs.lets[n]
		l.used = true
		at := s.rangeAt(identOffset(s.val, n), len(n))
		fail := func(summary, format string, args ...any) {
			bad = append(bad, n)
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: &at})
		}
		if slices.Contains(stack, n) {
			fail("Let cycle", "Shared let %s reads itself through %s.", n, strings.Join(append(stack, n), " -> "))
			continue
		}
		key := n + "\x00" + vs.signature()
		if done, ok := c.defs.inlined[key]; ok {
			// Compiled for this environment already: lets reading each
			// other twice over must not cost twice per level.
			if done.bad != "" {
				fail(done.summary, "%s", done.bad)
			} else {
				out = append(out, done.inline)
			}
			continue
		}
		inner, _, innerDiags := c.inlines(l.expr, vs, append(stack, n))
		var comp *compiled
		var err error
		if len(innerDiags) == 0 {
			comp, err = c.cache.compileInlined(c.envs, vs, l.expr.val, c.costLimit, inner)
		}
		switch {
		case len(innerDiags) > 0:
			// Reported here, as the use of n: a let it reads fails inside it.
			d := innerDiags[0]
			if strings.HasPrefix(d.Detail, "In shared let ") {
				fail(d.Summary, "%s", d.Detail) // the innermost let is named already
			} else {
				fail(d.Summary, "In shared let %s (%s): %s", n, l.rng, d.Detail)
			}
		case err != nil:
			fail("CEL environment", "%v", err)
		case comp.issues != nil:
			msg := comp.issues.Errors()[0].Message
			detail := fmt.Sprintf("Shared %s %s (%s) does not compile where it is used: %s.", l.kind, n, l.rng, msg)
			if m := undeclaredRE.FindStringSubmatch(msg); m != nil {
				detail += fmt.Sprintf(" It reads %s, which is not bound here; names bound here: %s.", m[1], strings.Join(sortedNames(vs), ", "))
			}
			fail("Shared "+l.kind+" does not fit here", "%s", detail)
		default:
			in := inline{name: n, src: l.expr.val, inner: inner, ast: comp.ast, out: comp.out, size: len(l.expr.val)}
			for _, x := range inner {
				in.size += x.size
			}
			if in.size > maxInlined {
				fail("Shared let too large", "Shared let %s (%s) grows to %d bytes of CEL with the lets it reads inlined, more than %d: name fewer levels of lets that each read the next ones.", n, l.rng, in.size, maxInlined)
				break
			}
			out = append(out, in)
		}
		if len(bad) > 0 && bad[len(bad)-1] == n {
			d := diags[len(diags)-1]
			c.defs.inlined[key] = inlined{summary: d.Summary, bad: d.Detail}
		} else {
			c.defs.inlined[key] = inlined{inline: out[len(out)-1]}
		}
	}
	return out, bad, diags
}

// maxInlined bounds the CEL a let grows to with the lets it reads inlined,
// as cel-go bounds an expression's source: lets that each read the next two
// would double at every level.
const maxInlined = 1 << 14

// inlined is a let compiled for one environment, or why it did not compile.
type inlined struct {
	inline
	summary, bad string
}

var undeclaredRE = regexp.MustCompile(`undeclared reference to '([^']+)'`)

// identOffset finds the first use of name as an identifier in a CEL
// source, outside string literals (0 when there is none).
func identOffset(src, name string) int {
	isID := func(b byte) bool {
		return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
	}
	for i := 0; i < len(src); i++ {
		switch ch := src[i]; {
		case ch == '\'' || ch == '"':
			for i++; i < len(src) && src[i] != ch; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case strings.HasPrefix(src[i:], name) && (i == 0 || !isID(src[i-1])) && (i+len(name) == len(src) || !isID(src[i+len(name)])):
			return i
		}
	}
	return 0
}

// undeclared explains an undeclared name at its use: a shared aggregate
// whose params the place does not bind, or the closest name that is bound.
func (c *compiler) undeclared(name string, vs *vars) string {
	if c.defs != nil {
		if ad := c.defs.aggs[name]; ad != nil {
			var missing []string
			for _, p := range ad.params {
				if !vs.has(p) {
					missing = append(missing, p)
				}
			}
			if len(missing) > 0 {
				return fmt.Sprintf(" Shared aggregate %s (%s) is grouped by %s; %s is not bound here.", name, ad.rng, strings.Join(ad.params, ", "), strings.Join(missing, ", "))
			}
			return fmt.Sprintf(" Shared aggregate %s (%s) cannot be read here: a rule reads one in its when, lets, choice and heads.", name, ad.rng)
		}
		if c.shared != nil {
			return fmt.Sprintf(" Shared aggregate %s sees its params (%s) and what its own patterns bind; add %s to its params if the rules bind it.", c.shared.name, strings.Join(c.shared.params, ", "), name)
		}
	}
	if c.defs != nil && c.defs.rels[name] != nil {
		return fmt.Sprintf(" %s is a relation: an aggregate counts over it with over = %q.", name, name)
	}
	cands := sortedNames(vs)
	if c.defs != nil {
		cands = append(cands, c.defs.names()...)
	}
	if n, ok := Closest(name, cands); ok && n != name {
		return fmt.Sprintf(" Did you mean %s?", n)
	}
	return ""
}

// unused warns of each definition no rule reads, and each action no rule
// takes.
func (d *defs) unused() hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, n := range append(d.names(), slices.Sorted(maps.Keys(d.acts))...) {
		df := d.lookup(n)
		if a := d.acts[n]; a != nil {
			df = &a.def
		}
		if df.used {
			continue
		}
		rng := df.rng
		detail := fmt.Sprintf("Shared %s %s is read by no rule; use it by name or remove it.", df.kind, n)
		if df.kind == "action" {
			detail = fmt.Sprintf("Action %s is taken by no rule; take it with do %q { ... } in a rule, or remove it.", n, n)
		}
		out = append(out, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Unused definition",
			Detail:  detail,
			Subject: &rng})
	}
	return out
}
