package engine

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// A round's plan commits while the round loop goes on to the next round (a
// flight) when the round was cut at its budget, and with
// Config.OverlapCommit always; the next round's view has the flight's
// writes laid over the mirror (facts.Mirror.ViewOver), so it plans on them
// as if they had come back through the watch. Before the next plan
// commits, the flight lands: the next plan's reads of laid writes that
// committed get those writes' revisions (the guards compare them like any
// other read), and its firings that read a write that did not commit are
// dropped, and their keys evaluated again in the round after. At most one
// plan is in flight, and plans commit in the order they were evaluated.

// flight is a plan committing while the round loop goes on.
type flight struct {
	ev    Evaluator // the evaluator whose plan it is
	a     *applier
	over  []facts.Overlay // its writes, to lay over the next round's view
	done  chan struct{}   // closed when commitAll returned
	err   error           // commitAll's
	start time.Time
	took  time.Duration // commitAll's wall time
}

// launch starts committing p in the background.
func (l *leader) launch(ctx context.Context, ev Evaluator, p eval.Plan) {
	a := l.e.newApplier(l.t, p)
	f := &flight{ev: ev, a: a, over: overlayOf(a.pending, p.Rev), done: make(chan struct{}), start: time.Now()}
	l.fly = f
	l.e.flying.Store(true)
	go func() {
		defer close(f.done)
		f.err = a.commitAll(ctx)
		f.took = time.Since(f.start)
	}()
}

// Pending reports whether facts wait to be applied to the mirror that the
// round being evaluated has not seen: the mirror's Pending (pass it to
// eval.WithYield), but for while a plan is in flight. Its writes then come
// back through the watch while the next round evaluates, laid over that
// round's view already; ending the round for them would end every round
// at its first rule budget. A change an agent makes meanwhile waits for the
// round's end, within its four budgets.
func (e *Engine) Pending() bool { return !e.flying.Load() && e.mirror.Pending() }

// landing is closed when the plan in flight has committed (nil: none is).
func (l *leader) landing() <-chan struct{} {
	if l.fly == nil {
		return nil
	}
	return l.fly.done
}

// land waits for the plan in flight and settles its outcome. Without next,
// as apply does: the dropped bindings are evaluated again and what that
// plans committed. next, if not nil, is the plan ev evaluated meanwhile on
// a view with the flight's writes laid over it: it is resolved against the
// outcome (resolve), and the dropped bindings are left to the next round.
// It returns only on ctx's end or the loss of leadership.
func (l *leader) land(ctx context.Context, ev Evaluator, next *eval.Plan) error {
	e, f := l.e, l.fly
	l.fly = nil
	e.flying.Store(false)
	waited := time.Now()
	<-f.done
	wait := time.Since(waited)
	e.m.update(func(s *Stats) {
		s.ApplyTime += wait
		// The commit ran from f.start for f.took, the loop went on from
		// f.start until it waited. Not f.took-wait: wait includes this
		// goroutine's wake-up after the commit ended, which on a loaded
		// machine outlasts a short round's evaluation.
		s.ApplyOverlapTime += max(0, min(f.took, waited.Sub(f.start)))
	})
	e.noteCommitted(f.a.run.lastRev)
	if f.err != nil {
		// As apply does, and next, planned on writes that may not
		// have committed, is the next term's to evaluate again.
		f.a.report(f.ev)
		f.a.unsettle()
		if next != nil {
			l.discard(ev, *next)
		}
		return f.err
	}
	if next != nil {
		l.resolve(ev, f, next)
		// The next round evaluates the dropped bindings again, on
		// the state next's writes make: evaluated now, they would be
		// planned on a view without them, twice over.
		for k := range f.a.reeval {
			l.extra[k] = true
		}
		e.m.update(func(s *Stats) { s.Reevaluated += int64(len(f.a.reeval)) })
		clear(f.a.reeval)
	}
	finishing := time.Now()
	err := f.a.finish(ctx, f.ev)
	e.noteCommitted(f.a.run.lastRev)
	e.m.update(func(s *Stats) { s.ApplyTime += time.Since(finishing) })
	if err != nil {
		f.a.unsettle()
		return err
	}
	l.retryIfAbandoned()
	return nil
}

// resolve makes next, planned on the flight's laid writes, a plan of its
// own: a read of a laid put gets the revision its write committed at, and
// a firing that read a key a firing of the flight wrote but did not commit,
// or that must come after every firing before it (AfterAll) when one of
// the flight's did not commit, is dropped, its keys evaluated again next
// round. It runs before the flight's dropped bindings are evaluated again,
// so the revisions are those of the writes that were laid.
func (l *leader) resolve(ev Evaluator, f *flight, next *eval.Plan) {
	lost, own, whole := f.a.lost, f.a.run.ownRev, f.a.whole()
	out := next.Firings[:0]
	dropped := 0
	for _, g := range next.Firings {
		drop := g.AfterAll && !whole
		copied := false
		for i := 0; i < len(g.Reads) && !drop; i++ {
			switch r := g.Reads[i]; {
			case lost[r.Key]:
				drop = true
			case r.Rev == facts.Uncommitted:
				rev, ok := own[r.Key]
				if !ok && r.NoGuard {
					// An aggregate member the evaluator kept from an
					// earlier view, listed in the record only.
					continue
				}
				if !copied { // the evaluator's plan is not ours to change
					g.Reads, copied = append([]eval.Read(nil), g.Reads...), true
				}
				g.Reads[i].Rev, drop = rev, !ok
			}
		}
		if !drop {
			out = append(out, g)
			continue
		}
		dropped++
		for _, r := range g.Reads {
			l.extra[r.Key] = true
		}
		for _, w := range g.Writes {
			l.extra[w.Key] = true
		}
	}
	next.Firings = out
	if dropped > 0 {
		e := l.e
		e.log.Info("engine: firings planned on writes that did not commit; evaluating them again", "dropped", dropped, "version", next.RuleSetVersion)
		e.m.update(func(s *Stats) { s.Reevaluated += int64(dropped) })
		ev.Uncommitted()
	}
}

// overlayOf lists the writes of a plan's firings, the last per key, each
// laid while its key is no newer than the plan's first firing writing it
// read it (rev, the plan's view, when it did not read it).
func overlayOf(pending []*staged, rev int64) []facts.Overlay {
	at := map[string]int{}
	var out []facts.Overlay
	for _, st := range pending {
		for _, w := range st.f.Writes {
			if i, ok := at[w.Key]; ok {
				out[i].Value = w.Value
				continue
			}
			since := rev
			for _, r := range st.f.Reads {
				if r.Key == w.Key && !r.Own && !r.Prefix && !r.NoGuard {
					since = r.Rev
					break
				}
			}
			at[w.Key] = len(out)
			out = append(out, facts.Overlay{Key: w.Key, Value: w.Value, Since: since})
		}
	}
	return out
}

// evaluateOver is evaluate on a view with the plan in flight's writes laid
// over the mirror (none in flight: the mirror as it is).
func (l *leader) evaluateOver(fn func(r facts.Reader, laid []facts.Laid) eval.Plan) (p eval.Plan, err error) {
	var over []facts.Overlay
	if l.fly != nil {
		over = l.fly.over
	}
	l.e.mirror.ViewOver(over, func(r facts.Reader, laid []facts.Laid) {
		defer func() {
			if x := recover(); x != nil {
				err = fmt.Errorf("evaluator panicked: %v", x)
			}
		}()
		p = fn(r, laid)
	})
	return p, err
}

// logical returns the changes between the previous view the evaluator was
// given and r, which has laid over it: the mirror's changes in between,
// each with Prev as the previous view held it (a laid value, if it was
// laid), or its laid value if laid now; the laid keys whose value the two
// views differ on; and the keys to evaluate again (extra), as they stand.
// The evaluator keeps results from one view to the next (Continue): the
// changes must be exactly the difference, or they would drift.
func (l *leader) logical(r facts.Reader, changes []facts.Change, laid []facts.Laid) []facts.Change {
	if len(l.laid) == 0 && len(laid) == 0 && len(l.extra) == 0 {
		return changes
	}
	prev := make(map[string]*facts.Laid, len(l.laid))
	for i := range l.laid {
		prev[l.laid[i].Key] = &l.laid[i]
	}
	now := make(map[string]*facts.Laid, len(laid))
	for i := range laid {
		now[laid[i].Key] = &laid[i]
	}
	seen := make(map[string]bool, len(changes))
	out := make([]facts.Change, 0, len(changes)+len(laid))
	for _, c := range changes {
		seen[c.Key] = true
		n, laidNow := now[c.Key]
		if p, ok := prev[c.Key]; ok {
			if !laidNow && !l.extra[c.Key] && c.Deleted == (p.Value == nil) && (c.Deleted || bytes.Equal(c.Value, p.Value)) {
				// A laid write come back: the evaluator has seen it.
				// Passed again, every write would count twice, and a
				// round's changes would outgrow what the evaluator
				// adjusts its kept results for.
				continue
			}
			c.Prev, c.PrevKnown = p.Value, true
		}
		if laidNow {
			c = laidChange(n, c.Prev, c.PrevKnown, r.Rev())
		}
		out = append(out, c)
	}
	extra := make([]string, 0, len(l.extra))
	for k := range l.extra {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	keys := make([]string, 0, len(l.laid)+len(laid)+len(extra))
	for _, x := range l.laid {
		keys = append(keys, x.Key)
	}
	for _, x := range laid {
		keys = append(keys, x.Key)
	}
	keys = append(keys, extra...)
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		// Unchanged in the mirror since the previous view: what that
		// view held is its laid value, else the mirror's fact (under
		// this view's laid write, if one hides it).
		var old []byte
		oldOK := false
		if p, ok := prev[k]; ok {
			old, oldOK = p.Value, p.Value != nil
		} else if n, ok := now[k]; ok {
			old, oldOK = n.Under.Value, n.UnderOK
		} else if f, ok := r.Get(k); ok {
			old, oldOK = f.Value, true
		}
		if n, ok := now[k]; ok {
			if !l.extra[k] && oldOK == (n.Value != nil) && bytes.Equal(old, n.Value) {
				continue
			}
			out = append(out, laidChange(n, old, true, r.Rev()))
			continue
		}
		f, ok := r.Get(k)
		if !l.extra[k] && oldOK == ok && bytes.Equal(old, f.Value) {
			continue
		}
		if !ok {
			out = append(out, facts.Change{Fact: facts.Fact{Key: k, Value: old, ModRevision: r.Rev()}, Deleted: true,
				Prev: old, PrevKnown: true})
			continue
		}
		out = append(out, facts.Change{Fact: f, Prev: old, PrevKnown: true})
	}
	return out
}

// laidChange is the change to a laid write, from prev.
func laidChange(n *facts.Laid, prev []byte, prevKnown bool, rev int64) facts.Change {
	if n.Value == nil {
		return facts.Change{Fact: facts.Fact{Key: n.Key, Value: prev, ModRevision: rev}, Deleted: true, Prev: prev, PrevKnown: prevKnown}
	}
	// As etcd tells them: a creation has CreateRevision == ModRevision;
	// 0 when the previous value is unknown counts as an update, the wider
	// choice.
	f := facts.Fact{Key: n.Key, Value: n.Value, ModRevision: facts.Uncommitted}
	switch {
	case prevKnown && prev == nil:
		f.CreateRevision = facts.Uncommitted
	case prevKnown:
		f.CreateRevision = 1
	}
	return facts.Change{Fact: f, Prev: prev, PrevKnown: prevKnown}
}
