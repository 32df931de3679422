package rules

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// negativeCycles reports each cycle through negation that a view closes
// over itself. Actions may negate their own and each other's output: that
// is how an action makes its guard false (the scheduler places what has no
// placement), and actions fire in a fixed order to a fixpoint, with
// oscillation stopped at run time. An action may also read a view of the
// same component, as long as the view does not test the absence of what
// the cycle writes: the view is then a function of the facts at every step.
// A view that does test it would depend on its own absence, through the
// action: the result would depend on evaluation order.
//
// One diagnostic per such cycle names every rule in it, in order, at the
// read that closes it: an action's read of the view where there is one (in
// a layered set views come before the actions that read them, so that is
// the read that made the cycle), else the view's absent pattern.
func (g *graph) negativeCycles(comp []int) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := map[string]bool{}
	for u, r := range g.rs.Rules {
		if !r.Derives() {
			continue
		}
		for _, e := range g.deps[u] {
			if e.neg == nil || comp[e.to] != comp[u] {
				continue
			}
			path := g.path(e.to, u, comp) // e.to ->* u: with u -neg-> e.to, a cycle
			cycle := append([]edge{e}, path...)
			from := append([]int{u}, pathFrom(e.to, path)...)
			at, closing := e.neg.Range, -1
			for i, ce := range cycle {
				if ce.p != nil && !g.rs.Rules[from[i]].Derives() && g.rs.Rules[ce.to].Derives() {
					at, closing = ce.p.Range, i
					break
				}
			}
			var names, steps []string
			for i, ce := range cycle {
				names = append(names, g.rs.Rules[from[i]].Name)
				steps = append(steps, g.step(from[i], ce))
			}
			// The same cycle is met from each of its views: once.
			sorted := append([]string(nil), names...)
			sort.Strings(sorted)
			key := fmt.Sprint(at, sorted)
			if seen[key] {
				continue
			}
			seen[key] = true
			fix := "Break the cycle: test a fact no rule of the cycle writes, or compute what the view holds in the action itself."
			if closing >= 0 {
				fix = fmt.Sprintf("Rule %q reads the view of %q, which tests the absence of what the cycle writes: read the facts the view is made of instead, or make the view test something else.", g.rs.Rules[from[closing]].Name, g.rs.Rules[cycle[closing].to].Name)
			}
			rng := at
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cycle through negation",
				Detail: fmt.Sprintf("Rules %s form a cycle through negation, so the view %q would depend on its own absence: %s. %s",
					strings.Join(names, ", "), r.Name, strings.Join(steps, "; "), fix),
				Subject: &rng})
		}
	}
	return diags
}

// step says what one edge of a cycle is: a rule reading (or testing the
// absence of) what the next one writes.
func (g *graph) step(from int, e edge) string {
	a, b := g.rs.Rules[from].Name, g.rs.Rules[e.to].Name
	switch {
	case e.neg != nil:
		return fmt.Sprintf("%q tests the absence of %q, which %q writes", a, e.neg.Template, b)
	case e.p != nil:
		return fmt.Sprintf("%q reads %q (%s), which %q writes", a, e.p.Template, e.p.Range, b)
	}
	return fmt.Sprintf("%q is ordered after %q", a, b)
}

// path returns the edges of a shortest path from rule a to rule b inside
// their component (breadth first, in edge order: deterministic).
func (g *graph) path(a, b int, comp []int) []edge {
	if a == b {
		return nil
	}
	type hop struct {
		prev int
		e    edge
	}
	came := map[int]hop{a: {prev: -1}}
	queue := []int{a}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, e := range g.deps[v] {
			if comp[e.to] != comp[a] {
				continue
			}
			if _, ok := came[e.to]; ok {
				continue
			}
			came[e.to] = hop{prev: v, e: e}
			if e.to == b {
				var out []edge
				for w := b; w != a; w = came[w].prev {
					out = append([]edge{came[w].e}, out...)
				}
				return out
			}
			queue = append(queue, e.to)
		}
	}
	return nil // not reached: a and b share a component
}

// pathFrom lists the rules a path's edges start from, the first being a.
func pathFrom(a int, path []edge) []int {
	out := []int{}
	for _, e := range path {
		out = append(out, a)
		a = e.to
	}
	return out
}
