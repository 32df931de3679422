package ruletest

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// A world is a named set of facts that tests and steps include by name
// (worlds = ["api_two_serving"]): the situation many tests start from,
// written once. A world with params is included like a function call,
// one argument a param (worlds = [node("node-1")]), and its facts
// read the params as variables ("observed/node/${id}/state"). A world
// may include others as a test does. The worlds of a directory's test
// files are shared by all of them.
type world struct {
	name   string
	rng    hcl.Range
	params []string
	body   *hcl.BodyContent // evaluated at each inclusion when there are params
	done   bool             // without params: puts holds the expansion
	puts   []facts.Fact
	used   bool
}

type worlds map[string]*world

var worldSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "params"}, {Name: "worlds"}, {Name: "facts"}, {Name: "raw"}, {Name: "unleased"}}}

// define reads world blocks; a name is defined once per directory.
func (ws worlds) define(blocks hcl.Blocks, schema *facts.Schema) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, b := range blocks {
		name := b.Labels[0]
		rng := b.DefRange
		if prev := ws[name]; prev != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate world",
				Detail: fmt.Sprintf("World %q is already defined at %s; a world's name is defined once among the test files of a directory.", name, prev.rng), Subject: &rng})
			continue
		}
		c, d := b.Body.Content(worldSchema)
		diags = append(diags, d...)
		w := &world{name: name, rng: rng, body: c}
		if a := c.Attributes["params"]; a != nil {
			w.params, d = strList(a, nil)
			diags = append(diags, d...)
			for _, p := range w.params {
				if !hclsyntax.ValidIdentifier(p) {
					r := a.Expr.Range()
					diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid param",
						Detail: fmt.Sprintf("%q: a param is a name such as id, read in the world's facts as ${id}.", p), Subject: &r})
				}
			}
		}
		ws[name] = w
	}
	return diags
}

// include returns the facts of the worlds a worlds attribute names, in
// their order, leaving out the keys own sets: a test's own fact wins. Two
// worlds giving one key different values is an error naming both, unless
// own sets the key.
func (ws worlds) include(a *hcl.Attribute, own []facts.Fact, schema *facts.Schema) ([]facts.Fact, hcl.Diagnostics) {
	budget := MaxWorldFacts
	return ws.includeIn(a, own, schema, nil, nil, &budget)
}

// MaxWorldFacts bounds the facts one worlds list expands to: worlds that
// include others with params, each several times, grow exponentially.
const MaxWorldFacts = 100000

// includeIn is include within a world's expansion: ctx holds its params,
// stack the worlds being expanded.
func (ws worlds) includeIn(a *hcl.Attribute, own []facts.Fact, schema *facts.Schema, ctx *hcl.EvalContext, stack []string, budget *int) ([]facts.Fact, hcl.Diagnostics) {
	elems, diags := hcl.ExprList(a.Expr)
	if diags.HasErrors() {
		rng := a.Expr.Range()
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid worlds",
			Detail: `worlds is a list of the worlds to include: names, and worlds with params given their arguments, such as ["api_two_serving", node("node-1")].`, Subject: &rng}}
	}
	mine := map[string]bool{}
	for _, f := range own {
		mine[f.Key] = true
	}
	var out []facts.Fact
	from := map[string]int{}  // key -> index in out
	by := map[string]string{} // key -> the inclusion that set it
	seen := map[string]bool{}
	for _, e := range elems {
		rng := e.Range()
		puts, label, d := ws.expand(e, schema, ctx, stack, budget)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if seen[label] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "World included twice",
				Detail: fmt.Sprintf("World %s is named twice in worlds.", label), Subject: &rng})
			continue
		}
		seen[label] = true
		for _, f := range puts {
			if mine[f.Key] {
				continue
			}
			if j, ok := from[f.Key]; ok {
				if !bytes.Equal(out[j].Value, f.Value) || out[j].Lease != f.Lease {
					diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Worlds disagree",
						Detail: fmt.Sprintf("%s is %s in world %s and %s in world %s; set it in the test itself to say which.",
							f.Key, out[j].Value, by[f.Key], f.Value, label), Subject: &rng})
				}
				continue
			}
			from[f.Key], by[f.Key] = len(out), label
			out = append(out, f)
		}
	}
	return out, diags
}

// expand returns the facts of one element of a worlds list: a name, or a
// call of a world with params; label names it in diagnostics.
func (ws worlds) expand(e hcl.Expression, schema *facts.Schema, ctx *hcl.EvalContext, stack []string, budget *int) ([]facts.Fact, string, hcl.Diagnostics) {
	rng := e.Range()
	var name string
	var args []cty.Value
	var diags hcl.Diagnostics
	if call, ok := e.(*hclsyntax.FunctionCallExpr); ok {
		name = call.Name
		for _, x := range call.Args {
			v, d := x.Value(ctx)
			diags = append(diags, d...)
			args = append(args, v)
		}
		if diags.HasErrors() {
			return nil, "", diags
		}
	} else {
		v, d := e.Value(ctx)
		if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
			return nil, "", append(d, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid world",
				Detail: `An element of worlds is a world's name, such as "api_two_serving", or a world with params given its arguments, such as node("node-1").`, Subject: &rng})
		}
		name = v.AsString()
	}
	w := ws[name]
	if w == nil {
		detail := fmt.Sprintf("No world %q is defined in this directory's test files.", name)
		if c, ok := rules.Closest(name, ws.names()); ok {
			detail += fmt.Sprintf(" Did you mean %q?", c)
		}
		return nil, "", append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown world", Detail: detail, Subject: &rng})
	}
	w.used = true
	if len(args) != len(w.params) {
		detail := fmt.Sprintf("World %q takes no arguments: include it by name, \"%s\".", name, name)
		if len(w.params) > 0 {
			detail = fmt.Sprintf("World %q takes %d argument(s), %s; %d given.", name, len(w.params), strings.Join(w.params, ", "), len(args))
		}
		return nil, "", append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Wrong arguments for world", Detail: detail, Subject: &rng})
	}
	for i, n := range stack {
		if n == name {
			return nil, "", append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "World includes itself",
				Detail: fmt.Sprintf("World %q includes itself: %s.", name, strings.Join(append(stack[i:], name), " → ")), Subject: &rng})
		}
	}
	if len(w.params) == 0 {
		if !w.done {
			// Expanded once, its diagnostics reported once.
			w.done = true
			w.puts, diags = ws.expandBody(w, schema, nil, stack, budget)
			return w.puts, fmt.Sprintf("%q", name), diags
		}
		return w.puts, fmt.Sprintf("%q", name), nil
	}
	wctx := &hcl.EvalContext{Variables: map[string]cty.Value{}}
	shown := make([]string, len(args))
	for i, p := range w.params {
		wctx.Variables[p] = args[i]
		shown[i] = argText(args[i])
	}
	label := fmt.Sprintf("%s(%s)", name, strings.Join(shown, ", "))
	puts, d := ws.expandBody(w, schema, wctx, stack, budget)
	if d.HasErrors() {
		// Say which inclusion the world's own error is for.
		d = append(d, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid world", Detail: fmt.Sprintf("World %s does not expand (above).", label), Subject: &rng})
	}
	return puts, label, d
}

// expandBody returns a world's facts: those of the worlds it includes,
// then its own, which win.
func (ws worlds) expandBody(w *world, schema *facts.Schema, ctx *hcl.EvalContext, stack []string, budget *int) ([]facts.Fact, hcl.Diagnostics) {
	if *budget < 0 {
		return nil, nil // said once, below
	}
	own, unleased, diags := parseFacts(w.body, schema, ctx)
	if *budget -= len(own) + 1; *budget < 0 {
		rng := w.rng
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "World too large",
			Detail: fmt.Sprintf("Including world %q expands to more than %d facts, through the worlds it includes.", w.name, MaxWorldFacts), Subject: &rng})
	}
	leases(own, unleased, schema)
	a := w.body.Attributes["worlds"]
	if a == nil {
		return own, diags
	}
	inc, d := ws.includeIn(a, own, schema, ctx, append(stack[:len(stack):len(stack)], w.name), budget)
	for i := range inc {
		if unleased[inc[i].Key] {
			inc[i].Lease = 0
		}
	}
	return append(inc, own...), append(diags, d...)
}

// unused warns of the worlds no test or step includes, after expanding
// those without params, to report their errors too.
func (ws worlds) unused(schema *facts.Schema) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, n := range ws.names() {
		if w := ws[n]; !w.used && len(w.params) == 0 && !w.done {
			w.done = true
			var d hcl.Diagnostics
			budget := MaxWorldFacts
			w.puts, d = ws.expandBody(w, schema, nil, nil, &budget)
			diags = append(diags, d...)
		}
	}
	for _, n := range ws.names() {
		if w := ws[n]; !w.used {
			rng := w.rng
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Unused world",
				Detail: fmt.Sprintf("No test or step includes world %q.", n), Subject: &rng})
		}
	}
	return diags
}

func (ws worlds) names() []string {
	out := make([]string, 0, len(ws))
	for n := range ws {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// argText shows an argument as it is written.
func argText(v cty.Value) string {
	switch {
	case v.IsNull():
		return "null"
	case v.Type() == cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case v.Type() == cty.Number:
		return v.AsBigFloat().Text('g', -1)
	case v.Type() == cty.Bool:
		return fmt.Sprint(v.True())
	}
	return v.Type().FriendlyName()
}
