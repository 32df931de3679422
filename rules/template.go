package rules

import (
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
)

// parseTemplate splits a rule's key template into segments. Unlike a schema
// template, a rule may write a literal where the schema has a variable
// ("intent/user/service/{name}/instances"); it may not write a variable
// where the schema has a literal.
func parseTemplate(s strLit, what string) ([]Seg, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	if s.val == "" {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Empty key template",
			Detail: fmt.Sprintf("Expected %s such as \"observed/instance/{id}/state\".", what), Subject: &s.rng}}
	}
	parts := strings.Split(s.val, "/")
	segs := make([]Seg, len(parts))
	seen := map[string]bool{}
	off := 0
	for i, p := range parts {
		rng := s.rangeAt(off, len(p))
		off += len(p) + 1
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") && len(p) > 2 {
			v := p[1 : len(p)-1]
			if d := checkIdent(v, "Key variable", rng); d != nil {
				diags = append(diags, d)
				continue
			}
			if seen[v] {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Repeated key variable",
					Detail: fmt.Sprintf("{%s} appears twice in %q; a template binds each variable once.", v, s.val), Subject: &rng})
				continue
			}
			seen[v] = true
			segs[i] = Seg{Var: v}
			continue
		}
		if p == "" || strings.ContainsAny(p, "{}* ") {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid key segment",
				Detail: fmt.Sprintf("Segment %d of %q is %q: expected a literal such as \"state\" or a variable such as {id}.", i+1, s.val, p), Subject: &rng})
			continue
		}
		segs[i] = Seg{Lit: p}
	}
	if len(diags) == 0 && segs[0].Var != "" {
		rng := s.rangeAt(0, len(parts[0]))
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid key template",
			Detail: "The first segment of a key is its tree (desired, observed, placement, ...); it cannot be a variable.", Subject: &rng})
	}
	return segs, diags
}

// resolveType finds the fact type a rule template denotes. A literal may
// stand where the schema has a variable (it must be a valid value for it);
// among several matches the one with the most literal-for-literal segments
// wins, as facts.Schema.Parse prefers literals.
func resolveType(schema *facts.Schema, segs []Seg) *facts.FactType {
	var best *facts.FactType
	bestLits := -1
	for _, t := range schema.Types() {
		if len(t.Segments) != len(segs) {
			continue
		}
		lits, ok := 0, true
		for i, ts := range t.Segments {
			rs := segs[i]
			switch {
			case ts.Var == "" && rs.Var == "":
				ok = ts.Literal == rs.Lit
				lits++
			case ts.Var == "" && rs.Var != "":
				ok = false
			case ts.Var != "" && rs.Var == "":
				ok = facts.CheckSegment(ts.Var, rs.Lit) == nil
			}
			if !ok {
				break
			}
		}
		if ok && lits > bestLits {
			best, bestLits = t, lits
		}
	}
	return best
}

// normTemplate replaces variable names with {} for comparing shapes.
func normTemplate(segs []Seg) string {
	parts := make([]string, len(segs))
	for i, s := range segs {
		if s.Var != "" {
			parts[i] = "{}"
		} else {
			parts[i] = s.Lit
		}
	}
	return strings.Join(parts, "/")
}

// unknownKeyForm is the diagnostic for a template no fact type matches,
// with the closest template of the schema as a suggestion.
func unknownKeyForm(schema *facts.Schema, s strLit, segs []Seg) *hcl.Diagnostic {
	norm := normTemplate(segs)
	var cands []string
	byNorm := map[string]string{}
	for _, t := range schema.Types() {
		ps := make([]Seg, len(t.Segments))
		for i, sg := range t.Segments {
			ps[i] = Seg{Lit: sg.Literal, Var: sg.Var}
		}
		n := normTemplate(ps)
		cands = append(cands, n)
		byNorm[n] = t.Template
	}
	detail := fmt.Sprintf("%q matches no key form of the schema (see `ccattler facts schema`).", s.val)
	if c, ok := Closest(norm, cands); ok {
		detail += fmt.Sprintf(" Did you mean %q?", byNorm[c])
	}
	rng := s.rng
	if i, off, n := firstBadSegment(schema, segs); i >= 0 {
		rng = s.rangeAt(off, n)
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown key form", Detail: detail, Subject: &rng, Context: &s.rng}
}

// firstBadSegment finds the first segment after which no key form of the
// schema can continue the template: the caret goes under it. It returns
// the segment's index, byte offset and length, or -1.
func firstBadSegment(schema *facts.Schema, segs []Seg) (int, int, int) {
	types := schema.Types()
	off := 0
	for i, sg := range segs {
		n := len(sg.Lit)
		if sg.Var != "" {
			n = len(sg.Var) + 2
		}
		ok := false
		for _, t := range types {
			if len(t.Segments) <= i {
				continue
			}
			prefixOK := true
			for j := 0; j <= i && prefixOK; j++ {
				ts, rs := t.Segments[j], segs[j]
				switch {
				case ts.Var == "" && rs.Var == "":
					prefixOK = ts.Literal == rs.Lit
				case ts.Var == "" && rs.Var != "":
					prefixOK = false
				case ts.Var != "" && rs.Var == "":
					prefixOK = facts.CheckSegment(ts.Var, rs.Lit) == nil
				}
			}
			if prefixOK {
				ok = true
				break
			}
		}
		if !ok {
			return i, off, n
		}
		off += n + 1
	}
	return -1, 0, 0
}

// overlaps reports whether two templates of the same fact type can denote
// the same key: no position holds two different literals.
func overlaps(a, b []Seg) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Var == "" && b[i].Var == "" && a[i].Lit != b[i].Lit {
			return false
		}
	}
	return true
}

// literalPrefix is the template up to its first variable, e.g.
// "observed/instance/" for "observed/instance/{id}/state".
func literalPrefix(segs []Seg) string {
	var b strings.Builder
	for _, s := range segs {
		if s.Var != "" {
			return b.String()
		}
		b.WriteString(s.Lit)
		b.WriteByte('/')
	}
	return b.String()
}
