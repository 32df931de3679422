package eval

import (
	"slices"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// A rule may match the clock (observed/clock, a Volatile fact) only to
// stamp it: `emit "observed/instance/{id}/stopped_at" { value = "clock" }`.
// The clock moves every second, and evaluating such a rule again under
// every binding each time it moves (every alive node, for note_lost_lease)
// would change nothing: whether the action fires does not depend on the
// clock's value, only the value it writes does, and an action that fired
// has made its guard false. So a stamp pattern's value update does not
// dispatch its rule; its creation and deletion do, and any other change
// the rule reads evaluates it with the clock of the moment.

// stampOnly reports whether p is a stamp pattern of r: a match pattern of a
// volatile fact whose alias only emitted values read. Not in a rule that
// derives (a view follows every value it shows), nor where the alias is a
// key variable of another pattern or head (a join on the value) or read by
// a condition, let, aggregate, choice or fresh count.
func stampOnly(r *rules.Rule, p *rules.Pattern) bool {
	if !p.Type.Volatile || p.Type.Leased || p.Alias == "" || r.Derives() || !slices.Contains(r.Body.Match, p) {
		return false
	}
	a := p.Alias
	for _, q := range rulePatterns(r) {
		if q != p && slices.Contains(q.Vars(), a) {
			return false
		}
	}
	for _, h := range r.Heads {
		if slices.Contains(h.Vars(), a) {
			return false
		}
	}
	for _, x := range decisionExprs(r) {
		if x != nil && (x.AST == nil || idents(x.AST.NativeRep().Expr())[a]) {
			return false
		}
	}
	return true
}

// movedOnly reports whether c certainly replaced a valid value of p's type
// by another valid one: the fact existed before and after, so a stamp
// pattern still matches. A change that does not say what it replaced, or
// whose old or new value does not decode (the fact was or becomes absent
// to the rules), is not one.
func movedOnly(p *rules.Pattern, c facts.Change) bool {
	if c.Deleted || !c.PrevKnown || c.Prev == nil {
		return false
	}
	if _, err := decode(p.Type.Value, c.Prev); err != nil {
		return false
	}
	_, err := decode(p.Type.Value, c.Value)
	return err == nil
}

// rulePatterns lists every pattern of r: its body's and its choice's,
// with their aggregates'.
func rulePatterns(r *rules.Rule) []*rules.Pattern {
	var pats []*rules.Pattern
	scope := func(sc *rules.Scope) {
		pats = append(append(append(pats, sc.Match...), sc.Optional...), sc.Absent...)
		for _, ag := range sc.Aggregates {
			pats = append(append(append(pats, ag.Body.Match...), ag.Body.Optional...), ag.Body.Absent...)
		}
	}
	scope(r.Body)
	if r.Choose != nil {
		scope(r.Choose.Body)
	}
	return pats
}
