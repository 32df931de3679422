package rules

import (
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
)

// A delete head whose template ends in "/" deletes every fact under it:
// delete "observed/instance/{id}/" {} stands for one delete head per key
// form of the schema below that prefix (with a plugin's forms, when the set
// is loaded against a schema that registers them), so a new form of an
// entity is collected with the others instead of left behind.

// isPrefixDelete reports whether a head block is a delete by prefix.
func isPrefixDelete(b *hcl.Block) bool {
	return b.Type == "delete" && len(b.Labels) == 1 && strings.HasSuffix(b.Labels[0], "/") && len(b.Labels[0]) > 1
}

// prefixHeads expands a delete by prefix into the delete heads of the key
// forms under it. A form with a variable past the prefix cannot be named by
// a head (the rule binds no value for it): the prefix is refused then.
func (c *compiler) prefixHeads(b *hcl.Block, vs *vars) []*Head {
	label := b.Labels[0]
	s := strLit{val: strings.TrimSuffix(label, "/"), rng: b.LabelRanges[0], start: -1, src: c.src}
	if r := b.LabelRanges[0]; r.Start.Byte+1 < len(c.src) && r.End.Byte <= len(c.src) &&
		string(c.src[r.Start.Byte+1:r.End.Byte-1]) == label {
		s.start = r.Start.Byte + 1
	}
	prefix, d := parseTemplate(s, "a key prefix")
	if d != nil {
		c.diags = append(c.diags, d...)
		return nil
	}
	_, diags := b.Body.Content(emptySchema)
	c.diags = append(c.diags, diags...)
	var heads []*Head
	for _, t := range c.schema.Types() {
		if len(t.Segments) <= len(prefix) || !prefixOf(prefix, t.Segments[:len(prefix)]) {
			continue
		}
		segs := append([]Seg(nil), prefix...)
		parts := []string{s.val}
		for _, ts := range t.Segments[len(prefix):] {
			if ts.Var != "" {
				c.errorf(b.LabelRanges[0], "Prefix delete over a variable",
					"%q covers %s, whose {%s} comes after the prefix: a head names each key it deletes by the rule's variables. Delete those keys with a rule that binds {%s}, or end the prefix below them.",
					label, t.Template, ts.Var, ts.Var)
				return nil
			}
			segs = append(segs, Seg{Lit: ts.Literal})
			parts = append(parts, ts.Literal)
		}
		heads = append(heads, &Head{Kind: Delete, Template: strings.Join(parts, "/"), Type: t, Segs: segs, Range: s.rng, prefix: true})
	}
	if len(heads) == 0 {
		c.errorf(b.LabelRanges[0], "Empty prefix", "No key form of the schema lies under %q; `ccattler facts schema` lists them.", label)
		return nil
	}
	for _, sg := range prefix {
		if sg.Var != "" && !vs.has(sg.Var) {
			detail := fmt.Sprintf("{%s} in the head %q is bound by no pattern, choice or fresh id of the rule.", sg.Var, label)
			if n, ok := Closest(sg.Var, vs.names); ok {
				detail += fmt.Sprintf(" Did you mean {%s}?", n)
			}
			c.errorf(b.LabelRanges[0], "Unbound variable in head", "%s", detail)
			return nil
		}
	}
	return heads
}

// prefixOf reports whether a rule's prefix segments can denote the leading
// segments of a schema form: a literal may stand for a variable, not the
// other way round.
func prefixOf(prefix []Seg, lead []facts.Segment) bool {
	for i, ts := range lead {
		rs := prefix[i]
		switch {
		case ts.Var == "" && rs.Var == "":
			if ts.Literal != rs.Lit {
				return false
			}
		case ts.Var == "" && rs.Var != "":
			return false
		case ts.Var != "" && rs.Var == "":
			if facts.CheckSegment(ts.Var, rs.Lit) != nil {
				return false
			}
		}
	}
	return true
}

// leaveViews drops from the heads of deletes by prefix the key forms a
// derive rule of the set maintains: a view deletes its own keys once no
// binding derives them, and an action deleting them too would only race it.
func leaveViews(rs *RuleSet) {
	for _, r := range rs.Rules {
		kept := r.Heads[:0]
		for _, h := range r.Heads {
			if !h.prefix || !derived(rs, h) {
				kept = append(kept, h)
			}
		}
		r.Heads = kept
	}
}

func derived(rs *RuleSet, h *Head) bool {
	for _, v := range rs.Rules {
		if !v.Derives() {
			continue
		}
		for _, vh := range v.Heads {
			if vh.Type == h.Type && overlaps(vh.Segs, h.Segs) {
				return true
			}
		}
	}
	return false
}
