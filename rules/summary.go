package rules

import (
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
)

// A summary is a rule for people: a `summary "name" { ... }` block has the
// body of a rule and derive heads only, and maintains facts that a command
// or the console shows in place of reading every fact they are counted from
// (`ccattler get services` reads observed/service/{name}/summary, not every
// instance). Three things follow from "for people":
//
//   - No rule reads what a summary derives (a summary included), so a
//     summary changes no decision; the check is at load, at the reading
//     pattern.
//   - Summaries run after every rule: they come last in RuleSet.Rules, so
//     each pass of a round counts what its rules wrote.
//   - A rule test leaves them out unless it asks for them (WithoutSummaries):
//     since nothing reads them, that changes no other write or firing, and a
//     test of the control rules asserts exactly what it did before.

// isRuleBlock reports whether a top-level block is a rule or a summary:
// both compile as rules.
func isRuleBlock(b *hcl.Block) bool { return b.Type == "rule" || b.Type == "summary" }

// summaryHeads refuses the heads a summary may not have: it derives what it
// shows, it does not act.
func (c *compiler) summaryHeads(r *Rule, content *hcl.BodyContent) {
	for _, b := range content.Blocks {
		switch b.Type {
		case "emit", "delete":
			c.errorf(b.DefRange, "Action in a summary",
				"Summary %q has a %s head: a summary derives facts for people and changes nothing else. Use derive, or make it a rule.", r.Name, b.Type)
		case "do":
			c.errorf(b.DefRange, "Action in a summary",
				"Summary %q takes action %q: a summary derives facts for people and changes nothing else.", r.Name, b.Labels[0])
		case "choose", "fresh":
			c.errorf(b.DefRange, "Action in a summary",
				"Summary %q has a %s block, which belongs to actions: a summary derives facts for people with match, optional, absent, aggregates and lets.", r.Name, b.Type)
		}
	}
}

// checkSummaries refuses a read of what a summary derives, and an after
// naming a summary from a rule (summaries run after every rule).
func checkSummaries(rs *RuleSet) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, r := range rs.Rules {
		for _, p := range readPatterns(r) {
			if p.Type.Name == "event" {
				rng := p.Range
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Read of a firing record",
					Detail: fmt.Sprintf("%s %q reads %q: records say why the control plane did what it did, for people (ccattler why, events). No rule may read one: the engine's mirror keeps records without their values, so such a rule would decide otherwise on a server than in its tests. Read the facts the record is about instead.",
						kindName(r), r.Name, p.Template),
					Subject: &rng})
				continue
			}
			for _, s := range rs.Rules {
				if !s.Summary {
					continue
				}
				for _, h := range s.Heads {
					if h.Type != p.Type || !overlaps(h.Segs, p.Segs) {
						continue
					}
					rng := p.Range
					diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Read of a summary",
						Detail: fmt.Sprintf("%s %q reads %q, which summary %q derives (%s). A summary is for people: no rule may read one, so that it changes no decision (rule tests leave summaries out unless they ask for them). Read the facts it is counted from instead.",
							kindName(r), r.Name, p.Template, s.Name, h.Range),
						Subject: &rng})
				}
			}
		}
		if r.Summary {
			continue
		}
		for i, a := range r.After {
			if s, ok := rs.byName[a]; ok && s.Summary {
				rng := r.afterRanges[i]
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Rule after a summary",
					Detail:  fmt.Sprintf("Rule %q is ordered after summary %q, but summaries run after every rule and write nothing a rule reads. Remove %q from its after list.", r.Name, a, a),
					Subject: &rng})
			}
		}
	}
	return diags
}

func kindName(r *Rule) string {
	if r.Summary {
		return "Summary"
	}
	return "Rule"
}

// summariesLast moves the summaries behind every rule, keeping the
// stratified order of each: nothing reads a summary, so the order stays a
// topological one.
func summariesLast(rs *RuleSet) {
	slices.SortStableFunc(rs.Rules, func(a, b *Rule) int {
		switch {
		case a.Summary == b.Summary:
			return 0
		case b.Summary:
			return -1
		}
		return 1
	})
	for i, r := range rs.Rules {
		r.Index = i
	}
}

// WithoutSummaries returns the rule set without its summaries: the rules
// alone, as a rule test runs them unless it asks for the summaries. The
// rules are the same (summaries come last, so their indexes hold); rs
// itself is returned when it has no summary.
func (rs *RuleSet) WithoutSummaries() *RuleSet {
	n := slices.IndexFunc(rs.Rules, func(r *Rule) bool { return r.Summary })
	if n < 0 {
		return rs
	}
	out := *rs
	out.Rules = rs.Rules[:n:n]
	out.byName = make(map[string]*Rule, n)
	for _, r := range out.Rules {
		out.byName[r.Name] = r
	}
	return &out
}
