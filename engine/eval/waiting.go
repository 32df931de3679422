package eval

import (
	"github.com/ccattler/ccattler/rules"
)

// A choice is evaluated again when a fact its candidates are made of
// changes: a node's state, the placements a node's used cpu is summed
// over. Such a change binds none of the body's variables (schedule's
// candidates are nodes, its bindings instances), so the rule is
// evaluated again under the empty binding: every instance of the cluster
// is joined again to find the few without a placement. At 100,000
// instances that is half a second, paid in every round that places one.
//
// A rule that fills a hole — an action with a head that emits a key its
// body requires absent, as schedule emits the placement it requires
// absent — has a smaller answer: its bindings that still hold are those
// that found no candidate (the others wrote their head, and so no longer
// hold). The evaluator keeps them, by rule, as they are met: a waitSet.
// A change to a choice's candidates then evaluates the waiting bindings
// again, not the rule under the empty binding.
//
// The set is exact only while every binding the rule met since the last
// evaluation under the empty binding was kept or fired, and every firing
// committed. ok says so; when it is not, a candidate change evaluates the
// rule under the empty binding as before, and that evaluation makes the
// set exact again. It is lost (ok cleared) when the rule is stopped for a
// round, when a round is redone for an oscillation (the first attempt's
// bookkeeping is not the plan's), when the set grows past maxWaiting, and
// when the engine reports that firings of a plan did not commit
// (Uncommitted).
type waitSet struct {
	ok   bool
	b    map[string]*binding // by the binding's path variables (key)
	path map[string]bool     // the body's path variables
}

// coalesceAt is how many tasks of a hole-filling rule a round queues
// before it may evaluate the rule whole instead, as one task. A binding
// evaluated in a task of its own pays the task's setup, and a rule's
// budget is checked between tasks: 10,000 placements as tasks of their own
// took 250 rounds at medium, against 18 as one task, every round paying
// its fixed cost. A burst (instances created, a node's capacity freed) is
// evaluated whole; a trickle, binding by binding. Evaluating whole costs
// the facts it visits first (wholeCost), so it is chosen only for more
// tasks than a wholePerTask'th of those: at 100,000 pending instances,
// the few hundred reports of a round (each a task that finds its
// instance placed) are not worth a scan of every pending one.
const (
	coalesceAt   = 256
	wholePerTask = 16
)

// wholeCost estimates how many facts evaluating r whole visits first: the
// facts holding a value its guard lets through, of its hinted pattern with
// the fewest (the scheduler's pending instances); 0 when no pattern is
// hinted.
func (rd *round) wholeCost(r *rules.Rule) int {
	best := 0
	for _, p := range r.Body.Match {
		pi := rd.e.pats[p]
		if pi == nil || pi.hint == nil {
			continue
		}
		n := 0
		for _, v := range pi.hint {
			n += rd.ov.count(p.Type, accByValue, 0, 0, v)
		}
		if best == 0 || n < best {
			best = n
		}
	}
	return best
}

// maxWaiting bounds a wait set: past it, a candidate change evaluates the
// rule whole again, which costs no more than that many bindings.
const maxWaiting = 4096

// fillsHole reports whether r is an action with a head that emits a key a
// pattern of its body requires absent: a binding that fires stops holding,
// whatever its other heads write (schedule also writes the placement's
// entry by node). Asking it of every head took the wait set from a rule
// with one more head, and every candidate change evaluated it whole: at
// 100,000 instances on 3 nodes, a converge 40 % longer.
func fillsHole(r *rules.Rule) bool {
	if r.Choose == nil || r.Derives() || r.Fresh != nil {
		return false
	}
	for _, h := range r.Heads {
		if h.Kind == rules.Emit && holeOf(r, h) != nil {
			return true
		}
	}
	return false
}

// holeOf returns the absent pattern of r's body that h writes, or nil.
func holeOf(r *rules.Rule, h *rules.Head) *rules.Pattern {
	for _, p := range r.Body.Absent {
		if p.Template == h.Template {
			return p
		}
	}
	return nil
}

func buildWaits(rs *rules.RuleSet) []*waitSet {
	out := make([]*waitSet, len(rs.Rules))
	for _, r := range rs.Rules {
		if !fillsHole(r) {
			continue
		}
		out[r.Index] = &waitSet{b: map[string]*binding{}, path: bodyKeyVars(r)}
	}
	return out
}

// Uncommitted tells the evaluator that firings of a plan it returned did
// not commit (dropped as stale, refused, abandoned): a binding it saw fire
// may still hold, so no wait set is exact any more, nor is any deadline
// (a binding that held is given none).
func (e *Evaluator) Uncommitted() {
	e.back = nil // what comes back is not known to be the plan any more: dispatched in full
	e.cands.reset()
	e.loseWaits(nil)
	e.loseDeadlines()
}

// waitsFor returns r's wait set when a candidate change may be answered
// from it.
func (rd *round) waitsFor(r *rules.Rule) *waitSet {
	if ws := rd.e.waits[r.Index]; ws != nil && ws.ok {
		return ws
	}
	return nil
}

// enqueueWaiting enqueues r's waiting bindings that agree with what kb
// binds of the variables keep admits, in place of kb itself; each leaves
// the set, which its task fills again if it still waits.
func (rd *round) enqueueWaiting(r *rules.Rule, ws *waitSet, kb *binding, keep func(string) bool) {
	for k, w := range ws.b {
		if agrees(w, kb, keep) {
			delete(ws.b, k)
			rd.enqueue(r, w)
		}
	}
}

// agrees reports whether w binds no variable kb binds (of those keep
// admits) to another value.
func agrees(w, kb *binding, keep func(string) bool) bool {
	for i, n := range kb.names {
		if !keep(n) {
			continue
		}
		if v, ok := w.get(n); ok && v.str != kb.vals[i].str {
			return false
		}
	}
	return true
}

// noteWaiting records what became of one binding of r that reached its
// choice: waiting (no candidate, or an error) or fired.
func (rd *round) noteWaiting(r *rules.Rule, s *sol, waits bool) {
	ws := rd.e.waits[r.Index]
	if ws == nil {
		return
	}
	keep := func(n string) bool { return ws.path[n] }
	rd.keyBuf = s.b.appendKey(rd.keyBuf[:0], keep)
	if !waits {
		delete(ws.b, string(rd.keyBuf))
		return
	}
	if _, ok := ws.b[string(rd.keyBuf)]; ok {
		return
	}
	if len(ws.b) >= maxWaiting {
		ws.ok = false
		return
	}
	ws.b[string(rd.keyBuf)] = s.b.restrict(keep)
}

// wholeTask is called before and after r's task under the empty binding:
// the set is emptied, filled by the task, and exact once it ran through.
func (rd *round) wholeTask(r *rules.Rule, done bool, err error) {
	ws := rd.e.waits[r.Index]
	if ws == nil {
		return
	}
	if !done {
		clear(ws.b)
		return
	}
	ws.ok = err == nil && !rd.stopped[r.Name]
}

// loseWaits marks r's wait set inexact (nil: every rule's).
func (e *Evaluator) loseWaits(r *rules.Rule) {
	for i, ws := range e.waits {
		if ws != nil && (r == nil || i == r.Index) {
			ws.ok = false
		}
	}
}
