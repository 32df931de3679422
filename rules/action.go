package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Shared actions: a top-level action block names a group of action heads
// (fresh, emit, delete) that several rules take, and a rule takes it with
// a do block giving its params:
//
//	action "create_pending" {
//	  params = ["count"]
//	  fresh "id" { count = "count" }
//	  emit "observed/instance/{id}/service" { value = "svc" }
//	  emit "observed/instance/{id}/state" { value = "'pending'" }
//	}
//
//	rule "create_instances" {
//	  ...
//	  do "create_pending" { count = "want - waiting - placed" }
//	}
//
// The heads are compiled into each rule that takes them, in that rule's
// environment, as a shared let is inlined where it is read: they read the
// rule's names (svc above) and the params, each param's expression being
// inlined where it is read. A rule that takes an action is the rule it
// would be with the heads written in it, to the compiled program.

var actionSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "params"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "fresh", LabelNames: []string{"var"}},
		{Type: "emit", LabelNames: []string{"key"}},
		{Type: "delete", LabelNames: []string{"key"}},
	},
}

type actDef struct {
	def
	content *hcl.BodyContent
	params  []string
	file    string
}

// actionDef records a shared action of this file.
func (c *compiler) actionDef(b *hcl.Block) *actDef {
	content, diags := b.Body.Content(actionSchema)
	c.diags = append(c.diags, diags...)
	if len(content.Blocks.OfType("emit"))+len(content.Blocks.OfType("delete")) == 0 {
		c.errorf(b.DefRange, "Action writes nothing", "Action %q has no emit or delete head: an action names the heads several rules take.", b.Labels[0])
	}
	if len(content.Blocks.OfType("fresh")) > 1 {
		c.errorf(content.Blocks.OfType("fresh")[1].DefRange, "Duplicate fresh", "An action draws at most one kind of fresh id.")
	}
	return &actDef{def: def{name: b.Labels[0], kind: "action", rng: b.LabelRanges[0]}, content: content,
		params: c.params(content), file: c.file}
}

// actionOf looks up the action a do block takes, reporting an unknown one
// at its name with the closest defined.
func (c *compiler) actionOf(b *hcl.Block) *actDef {
	name := b.Labels[0]
	if ad := c.defs.acts[name]; ad != nil {
		return ad
	}
	detail := fmt.Sprintf("No action %q is defined in the rule set.", name)
	if n, ok := Closest(name, slices.Sorted(maps.Keys(c.defs.acts))); ok {
		detail += fmt.Sprintf(" Did you mean %q?", n)
	}
	c.errorf(b.LabelRanges[0], "Unknown action", "%s", detail)
	return nil
}

// actionReads returns the CEL sources of an action's heads and fresh
// count, for what a rule taking it reads of the shared definitions.
func (d *defs) actionReads(ad *actDef) []string {
	var out []string
	src := d.srcs[ad.file]
	for _, b := range ad.content.Blocks {
		body, ok := b.Body.(*hclsyntax.Body)
		if !ok {
			continue
		}
		for _, a := range body.Attributes {
			if s, dg := stringOf(a.Expr, src, ""); dg == nil {
				out = append(out, s.val)
			}
		}
	}
	return out
}

// doAction compiles the heads of the action a do block takes into the rule
// r, in the rule's environment vs with the block's params inlined.
func (c *compiler) doAction(r *Rule, b *hcl.Block, vs *vars) {
	ad := c.actionOf(b)
	if ad == nil {
		return
	}
	ad.used = true
	given, diags := attrs(b.Body)
	c.diags = append(c.diags, diags...)
	args := map[string]inline{}
	for _, a := range given {
		if !slices.Contains(ad.params, a.Name) {
			detail := fmt.Sprintf("Action %s (%s) has no param %s", ad.name, ad.rng, a.Name)
			if len(ad.params) > 0 {
				detail += "; its params: " + strings.Join(ad.params, ", ")
			}
			detail += "."
			if n, ok := Closest(a.Name, ad.params); ok {
				detail += fmt.Sprintf(" Did you mean %s?", n)
			}
			c.errorf(a.NameRange, "Unknown param", "%s", detail)
			continue
		}
		e, inl := c.exprInlines(a, vs, "a CEL expression", nil)
		if e == nil {
			args[a.Name] = inline{} // reported; the heads are still checked
			continue
		}
		in := inline{name: a.Name, src: e.Src, inner: inl, ast: e.AST, out: e.Type, size: len(e.Src)}
		for _, x := range inl {
			in.size += x.size
		}
		args[a.Name] = in
	}
	for _, p := range ad.params {
		if _, ok := args[p]; !ok {
			c.errorf(b.DefRange, "Missing param", "Action %s (%s) takes param %s: give it in the do block, as %s = \"expr\".", ad.name, ad.rng, p, p)
			return
		}
		if args[p].ast == nil {
			return
		}
	}
	dc := &compiler{loader: c.loader, file: ad.file, src: c.defs.srcs[ad.file], defs: c.defs, uses: c.uses, args: args}
	for _, fb := range ad.content.Blocks.OfType("fresh") {
		if r.Fresh != nil {
			c.errorf(b.DefRange, "Duplicate fresh", "Action %s draws fresh {%s}, and rule %q draws {%s} already: a rule draws at most one kind of fresh id.", ad.name, fb.Labels[0], r.Name, r.Fresh.Var)
			continue
		}
		r.Fresh = dc.fresh(fb, vs)
	}
	for _, hb := range ad.content.Blocks {
		switch hb.Type {
		case "emit":
			if h := dc.head(hb, Emit, vs); h != nil {
				r.Heads = append(r.Heads, h)
			}
		case "delete":
			if isPrefixDelete(hb) {
				r.Heads = append(r.Heads, dc.prefixHeads(hb, vs)...)
			} else if h := dc.head(hb, Delete, vs); h != nil {
				r.Heads = append(r.Heads, h)
			}
		}
	}
	// Reported at the action's heads, saying which rule's environment they
	// did not fit.
	use := b.DefRange
	for _, d := range dc.diags {
		d.Detail = fmt.Sprintf("In action %s, taken by rule %q at %s: %s", ad.name, r.Name, use, d.Detail)
	}
	c.diags = append(c.diags, dc.diags...)
}
