package eval

import (
	"container/heap"
	"slices"
	"time"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// A rule whose condition waits for time to pass reads the clock
// (observed/clock) in it: collect_stopped's `clock - stopped > duration('1h')`
// under every stopped instance. The clock moves every second, and
// evaluating such a rule under every binding each time it moves would, at
// 30,000 stopped instances, take most of a core to decide the same thing
// again (BENCHMARKS.md, "Where scaling back goes"). When the condition
// can only turn from false to true as the clock moves forward (it is
// monotone in the clock, checked from its expression: deadlineAlias), a
// binding found false is due again only once the clock passes the last
// time at which it is still false; a clock move evaluates the bindings it
// makes due, not the rule. Any other change the binding reads dispatches
// it as before, and its deadline is found again.
//
// The deadline is found by evaluating the condition at later clocks
// (deadlineSearch): doubling steps from one second until it holds, then
// halving the last step down to a second. Early is harmless (the binding
// is evaluated, found false, and given a new deadline); late never
// happens, because every probe that reads false is a time at which the
// condition is false, and a monotone condition is false at every earlier
// one.

// deadlineHorizon is how far ahead a search looks: a condition still
// false that far ahead is evaluated again then.
const deadlineHorizon = 1 << 25 * time.Second // about a year

// deadlineAlias returns the alias of r's clock pattern when r's bindings
// can be given deadlines: r is an action (a view follows what it reads),
// matches a volatile timestamp fact with no path variables under an
// alias, reads that alias in its condition and nowhere else (not in its other
// patterns, lets, aggregates, choice or any head, whose values would
// follow the clock), and the condition is monotone in it.
func deadlineAlias(r *rules.Rule) (string, bool) {
	if r.Derives() || r.When == nil || r.When.AST == nil || readsNow(r) {
		return "", false
	}
	var clock *rules.Pattern
	for _, p := range r.Body.Match {
		if p.Type.Volatile && !p.Type.Leased && p.Alias != "" && len(p.Vars()) == 0 {
			clock = p
		}
	}
	if clock == nil {
		return "", false
	}
	a := clock.Alias
	if !idents(r.When.AST.NativeRep().Expr())[a] {
		return "", false // not waiting for time (a stamp, stamp.go)
	}
	for _, q := range rulePatterns(r) {
		if q != clock && slices.Contains(patternVars(q), a) {
			return "", false
		}
	}
	for _, h := range r.Heads {
		if slices.Contains(h.Vars(), a) || (h.Value != nil && (h.Value.AST == nil || idents(h.Value.AST.NativeRep().Expr())[a])) {
			return "", false
		}
	}
	for _, x := range decisionExprs(r) {
		if x != nil && x != r.When && (x.AST == nil || idents(x.AST.NativeRep().Expr())[a]) {
			return "", false
		}
	}
	m := monotony{alias: a, ast: r.When.AST.NativeRep()}
	if !m.rising(m.ast.Expr()) {
		return "", false
	}
	return a, true
}

// monotony decides how expressions move as the clock alias moves forward.
type monotony struct {
	alias string
	ast   *ast.AST
}

// Directions of a value as the clock moves forward.
const (
	falls   = -1
	still   = 0
	rises   = 1
	unknown = 2
)

// rising reports whether the boolean x can only turn from false to true
// as the clock moves forward.
func (m monotony) rising(x ast.Expr) bool {
	if !idents(x)[m.alias] {
		return true
	}
	if x.Kind() != ast.CallKind {
		return false
	}
	c := x.AsCall()
	args := c.Args()
	switch c.FunctionName() {
	case operators.LogicalAnd, operators.LogicalOr:
		return !c.IsMemberFunction() && len(args) == 2 && m.rising(args[0]) && m.rising(args[1])
	case operators.Conditional:
		return len(args) == 3 && !idents(args[0])[m.alias] && m.rising(args[1]) && m.rising(args[2])
	case operators.Greater, operators.GreaterEquals:
		return len(args) == 2 && m.diff(args[0], args[1]) == rises
	case operators.Less, operators.LessEquals:
		return len(args) == 2 && m.diff(args[1], args[0]) == rises
	}
	return false
}

// diff is the direction of a - b.
func (m monotony) diff(a, b ast.Expr) int {
	da, db := m.dir(a), m.dir(b)
	switch {
	case da == unknown || db == unknown:
		return unknown
	case db == still:
		return da
	case da == still || da == -db:
		return -db
	}
	return unknown // both move the same way: the difference may go either way
}

// dir is the direction of the value x as the clock moves forward.
func (m monotony) dir(x ast.Expr) int {
	if !idents(x)[m.alias] {
		return still
	}
	switch x.Kind() {
	case ast.IdentKind:
		return rises // the alias itself: comprehension variables do not reach here (CallKind only)
	case ast.CallKind:
	default:
		return unknown
	}
	c := x.AsCall()
	args := c.Args()
	switch fn := c.FunctionName(); {
	case fn == operators.Subtract && len(args) == 2 && !c.IsMemberFunction():
		return m.diff(args[0], args[1])
	case fn == operators.Add && len(args) == 2 && !c.IsMemberFunction():
		da, db := m.dir(args[0]), m.dir(args[1])
		switch {
		case da == unknown || db == unknown:
			return unknown
		case da == still:
			return db
		case db == still || da == db:
			return da
		}
		return unknown
	case fn == operators.Multiply && len(args) == 2 && !c.IsMemberFunction():
		for i, k := range []ast.Expr{args[1], args[0]} {
			if s := positive(k); s != 0 {
				d := m.dir(args[i])
				if d == unknown {
					return unknown
				}
				return d * s
			}
		}
		return unknown
	case (fn == "int" || fn == "uint" || fn == "double") && len(args) == 1 && !c.IsMemberFunction():
		// Seconds of a timestamp, nanoseconds of a duration, a number's
		// truncation: each keeps the order.
		return m.dir(args[0])
	case (fn == "getMilliseconds" || fn == "getSeconds" || fn == "getMinutes" || fn == "getHours") && c.IsMemberFunction() && len(args) == 0:
		// A duration's whole milliseconds (seconds, ...) keep its order;
		// a timestamp's are the time of day, which wraps.
		if t := m.ast.GetType(c.Target().ID()); t != nil && t.IsExactType(types.DurationType) {
			return m.dir(c.Target())
		}
	}
	return unknown
}

// positive is 1 for a positive number literal, -1 for a negative one, 0
// for anything else.
func positive(x ast.Expr) int {
	if x.Kind() != ast.LiteralKind {
		return 0
	}
	switch v := x.AsLiteral().(type) {
	case types.Int:
		return sign(float64(v))
	case types.Uint:
		return sign(float64(v))
	case types.Double:
		return sign(float64(v))
	}
	return 0
}

func sign(f float64) int {
	switch {
	case f > 0:
		return 1
	case f < 0:
		return -1
	}
	return 0
}

// deadlines holds the bindings of one rule found false, by when they are
// due: a heap of entries, the latest entry of each binding the one that
// counts (an older one is dropped when it surfaces).
type deadlines struct {
	alias string
	vars  func(string) bool // the body's path variables: what a due binding is enqueued under
	byKey map[string]*deadline
	queue deadlineQueue
	// whole: a round stopped the rule (rd.problem) and dropped its tasks;
	// the next clock move evaluates it whole, as it did before deadlines.
	whole bool
}

type deadline struct {
	after time.Time // due once the clock is later
	key   string
	b     *binding
}

type deadlineQueue []*deadline

func (q deadlineQueue) Len() int           { return len(q) }
func (q deadlineQueue) Less(i, j int) bool { return q[i].after.Before(q[j].after) }
func (q deadlineQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *deadlineQueue) Push(x any)        { *q = append(*q, x.(*deadline)) }
func (q *deadlineQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return d
}

func newDeadlines(r *rules.Rule, alias string) *deadlines {
	vars := map[string]bool{}
	for _, p := range r.Body.Match {
		for _, v := range p.Vars() {
			vars[v] = true
		}
	}
	return &deadlines{alias: alias, vars: func(n string) bool { return vars[n] }, byKey: map[string]*deadline{}}
}

// noteDeadline records what evaluating r's condition under s found, and
// returns the binding it is kept under: a false condition gets the
// deadline the search finds; one that failed to evaluate is due at the
// next clock move; a true one none, since it stays true as the clock moves
// and what the action writes does not read the clock (deadlineAlias) —
// the caller makes it due if what follows the condition fails.
func (rd *round) noteDeadline(dl *deadlines, r *rules.Rule, s *sol, held bool, evalErr error) *binding {
	b := s.b.restrict(dl.vars)
	switch {
	case evalErr != nil:
		dl.add(b, time.Time{})
	case held:
		delete(dl.byKey, b.key())
	default:
		dl.add(b, rd.deadlineSearch(dl, r, s))
	}
	return b
}

// add makes b due once the clock is later than after; the zero time is
// due at the next move.
func (dl *deadlines) add(b *binding, after time.Time) {
	d := &deadline{after: after, key: b.key(), b: b}
	dl.byKey[d.key] = d
	heap.Push(&dl.queue, d)
	if len(dl.queue) > 2*len(dl.byKey)+1024 {
		dl.compact()
	}
}

// loseDeadlines makes every rule waiting for the clock evaluated whole at
// its next move: a round's bookkeeping was not the plan's (an attempt
// redone without an oscillating rule), or a binding that held may hold
// again (firings that did not commit).
func (e *Evaluator) loseDeadlines() {
	for _, dl := range e.deadlines {
		if dl != nil {
			dl.whole = true
		}
	}
}

// clockOf decodes the clock a change to p moved to.
func (rd *round) clockOf(p *rules.Pattern, c facts.Change) (time.Time, bool) {
	v, err := rd.e.values.decode(p.Type, c.Value)
	if err != nil {
		return time.Time{}, false
	}
	ts, ok := v.celOf().(types.Timestamp)
	return ts.Time, ok
}

// compact drops the entries a later one of the same binding replaced.
func (dl *deadlines) compact() {
	q := dl.queue[:0]
	for _, d := range dl.queue {
		if dl.byKey[d.key] == d {
			q = append(q, d)
		}
	}
	clear(dl.queue[len(q):])
	dl.queue = q
	heap.Init(&dl.queue)
}

// deadlineSearch returns the latest clock at which r's condition, false
// under s at the clock s holds, is still known false: the binding is due
// once the clock passes it. A probe that fails to evaluate, or a clock
// that is not a timestamp, makes it due at the next move.
func (rd *round) deadlineSearch(dl *deadlines, r *rules.Rule, s *sol) time.Time {
	cv, ok := s.b.get(dl.alias)
	if !ok {
		return time.Time{}
	}
	ts, ok := cv.celOf().(types.Timestamp)
	if !ok {
		return time.Time{}
	}
	now := ts.Time
	pb := s.b.cloneRoom(1)
	mark := pb.len()
	probe := func(t time.Time) (bool, bool) {
		pb.truncate(mark)
		pb.push(dl.alias, val{cel: types.Timestamp{Time: t}, str: t.Format(time.RFC3339Nano)})
		held, err := rd.evalBool(r.When, pb, what{kind: "when"})
		return held, err == nil
	}
	lo := now // false here
	step := time.Second
	var hi time.Time
	for ; step <= deadlineHorizon; step *= 2 {
		t := now.Add(step)
		held, ok := probe(t)
		if !ok {
			return lo
		}
		if held {
			hi = t
			break
		}
		lo = t
	}
	if hi.IsZero() {
		return lo
	}
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		held, ok := probe(mid)
		if !ok {
			return lo
		}
		if held {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

// due enqueues r's bindings whose deadline the clock, moved to now, has
// passed; the rest wait.
func (rd *round) due(r *rules.Rule, dl *deadlines, now time.Time) {
	if dl.whole {
		dl.whole = false
		rd.enqueue(r, &binding{})
		return
	}
	for len(dl.queue) > 0 && now.After(dl.queue[0].after) {
		d := heap.Pop(&dl.queue).(*deadline)
		if dl.byKey[d.key] != d {
			continue // replaced by a later evaluation
		}
		delete(dl.byKey, d.key)
		rd.e.stats.Due++
		rd.enqueue(r, d.b)
	}
}
