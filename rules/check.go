package rules

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// check runs the set-wide checks: after names, principals, writers of one
// key form, and stratification; and it orders the rules.
func check(rs *RuleSet) hcl.Diagnostics {
	var diags hcl.Diagnostics
	leaveViews(rs)
	errorf := func(rng hcl.Range, summary, format string, args ...any) {
		r := rng
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
			Detail: fmt.Sprintf(format, args...), Subject: &r})
	}
	names := make([]string, 0, len(rs.Rules))
	for _, r := range rs.Rules {
		names = append(names, r.Name)
	}
	for _, r := range rs.Rules {
		for i, a := range r.After {
			if _, ok := rs.byName[a]; !ok {
				detail := fmt.Sprintf("Rule %q is ordered after %q, which is not a rule of this set.", r.Name, a)
				if n, ok := Closest(a, names); ok {
					detail += fmt.Sprintf(" Did you mean %q?", n)
				}
				errorf(r.afterRanges[i], "Unknown rule", "%s", detail)
			}
		}
		if r.Principal == "" {
			continue
		}
		for _, h := range r.Heads {
			if !mayWrite(r.Principal, h) {
				errorf(h.Range, "Principal may not write here",
					"Rule %q runs as principal %q, which may write %s; %q is outside. Declare the principal that owns this tree.",
					r.Name, r.Principal, strings.Join(quoteAll(Principals[r.Principal]), ", "), h.Template)
			}
		}
	}
	g := newGraph(rs)
	// after must order: a rule after itself, directly or through others,
	// orders nothing.
	for _, r := range rs.Rules {
		if g.afterReach(r.Index, r.Index) {
			rng := r.Range
			if len(r.afterRanges) > 0 {
				rng = r.afterRanges[0]
			}
			errorf(rng, "Cycle in after", "Rule %q is ordered after itself through its after list (%s); after must name rules that run earlier.", r.Name, strings.Join(r.After, ", "))
		}
	}
	// Two rules that can write the same key form need a declared order.
	for i, a := range rs.Rules {
		for _, b := range rs.Rules[i+1:] {
			ha, hb, ok := sharedHead(a, b)
			if !ok || g.afterReach(a.Index, b.Index) || g.afterReach(b.Index, a.Index) {
				continue
			}
			_ = ha
			errorf(hb.Range, "Two rules write the same key form",
				"Rules %q (%s) and %q can both write %s. Declare which one runs later (its write wins) with after = [%q] in %q, or make their templates disjoint.",
				a.Name, ha.Range, b.Name, hb.Template, a.Name, b.Name)
		}
	}
	diags = append(diags, checkSummaries(rs)...)
	diags = append(diags, g.stratify()...)
	summariesLast(rs)
	return diags
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		if x == "" {
			x = "everything"
		}
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

// sharedHead finds heads of a and b that can write the same key.
func sharedHead(a, b *Rule) (*Head, *Head, bool) {
	for _, ha := range a.Heads {
		for _, hb := range b.Heads {
			if ha.Type == hb.Type && overlaps(ha.Segs, hb.Segs) {
				return ha, hb, true
			}
		}
	}
	return nil, nil, false
}

// readPatterns lists every pattern a rule reads, in every scope.
func readPatterns(r *Rule) []*Pattern {
	var out []*Pattern
	add := func(sc *Scope) {
		if sc == nil {
			return
		}
		out = append(out, sc.Match...)
		out = append(out, sc.Optional...)
		out = append(out, sc.Absent...)
		for _, ag := range sc.Aggregates {
			out = append(out, ag.Body.Match...)
			out = append(out, ag.Body.Optional...)
			out = append(out, ag.Body.Absent...)
		}
	}
	add(r.Body)
	if r.Choose != nil {
		add(r.Choose.Body)
	}
	return out
}

type edge struct {
	to  int
	neg *Pattern // the absent pattern, for a negative edge
	p   *Pattern // the pattern that reads what to writes (nil for an after edge)
}

// graph is the dependency graph: r -> s when r reads what s writes (or r
// is declared after s).
type graph struct {
	rs    *RuleSet
	deps  [][]edge
	after [][]int
}

func newGraph(rs *RuleSet) *graph {
	for i, r := range rs.Rules {
		r.Index = i
	}
	g := &graph{rs: rs, deps: make([][]edge, len(rs.Rules)), after: make([][]int, len(rs.Rules))}
	for i, r := range rs.Rules {
		for _, p := range readPatterns(r) {
			for j, s := range rs.Rules {
				for _, h := range s.Heads {
					if h.Type == p.Type && overlaps(h.Segs, p.Segs) {
						e := edge{to: j, p: p}
						if p.Negated {
							e.neg = p
						}
						g.deps[i] = append(g.deps[i], e)
					}
				}
			}
		}
		for _, a := range r.After {
			if s, ok := rs.byName[a]; ok {
				g.after[i] = append(g.after[i], s.Index)
				g.deps[i] = append(g.deps[i], edge{to: s.Index})
			}
		}
	}
	return g
}

// afterReach reports whether rule i is declared after rule j, directly or
// through other rules' after lists.
func (g *graph) afterReach(i, j int) bool {
	seen := map[int]bool{}
	stack := []int{i}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, m := range g.after[n] {
			if m == j {
				return true
			}
			if !seen[m] {
				seen[m] = true
				stack = append(stack, m)
			}
		}
	}
	return false
}

// stratify finds the strongly connected components, rejects a cycle
// through negation, and orders the rules: dependencies first, names
// breaking ties.
func (g *graph) stratify() hcl.Diagnostics {
	n := len(g.rs.Rules)
	index, low := make([]int, n), make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	comp := make([]int, n)
	var stack []int
	var comps [][]int
	next := 0
	var strong func(v int)
	strong = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range g.deps[v] {
			if index[e.to] < 0 {
				strong(e.to)
				low[v] = min(low[v], low[e.to])
			} else if onStack[e.to] {
				low[v] = min(low[v], index[e.to])
			}
		}
		if low[v] == index[v] {
			var c []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = len(comps)
				c = append(c, w)
				if w == v {
					break
				}
			}
			comps = append(comps, c)
		}
	}
	for v := 0; v < n; v++ {
		if index[v] < 0 {
			strong(v)
		}
	}
	diags := g.negativeCycles(comp)
	// Tarjan emits components in reverse topological order of the
	// condensation (dependencies first), which is the order we want; sort
	// members of a component by after edges, then name.
	order := make([]*Rule, 0, n)
	for s, c := range comps {
		members := make([]*Rule, len(c))
		for i, v := range c {
			members[i] = g.rs.Rules[v]
			members[i].Stratum = s
		}
		// A topological order of the after relation, ties by name. (A
		// comparison sort cannot do it: "after, else by name" is not a
		// strict weak order, and rules related only through a third one
		// came out in the wrong order.)
		sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
		members = g.afterOrder(members)
		order = append(order, members...)
	}
	g.rs.Rules = order
	for i, r := range order {
		r.Index = i
	}
	return diags
}

// afterOrder returns members (sorted by name) so that every rule comes after
// the rules it is ordered after, each time taking the first by name of those
// whose predecessors are all placed.
func (g *graph) afterOrder(members []*Rule) []*Rule {
	out := make([]*Rule, 0, len(members))
	placed := make([]bool, len(members))
	for len(out) < len(members) {
		next := -1
		for i, r := range members {
			if placed[i] {
				continue
			}
			ready := true
			for j, q := range members {
				if !placed[j] && j != i && g.afterReach(r.Index, q.Index) {
					ready = false
					break
				}
			}
			if ready {
				next = i
				break
			}
		}
		if next < 0 { // a cycle of after, reported earlier: keep the name order
			for i, r := range members {
				if !placed[i] {
					out = append(out, r)
					placed[i] = true
				}
			}
			break
		}
		placed[next] = true
		out = append(out, members[next])
	}
	return out
}
