package eval_test

import (
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// The bindings of a stamp rule's task that a round's firing budget cut are
// carried to the next call. The clock may move on before that call, and a
// clock that moves does not dispatch the rule (stamp.go): the carried
// bindings are then the only way to them, and each must still fire with
// the clock of the moment, not be lost for holding the clock it was cut
// with.
func TestStampCarriedAcrossClockMove(t *testing.T) {
	ev := eval.New(loadSrc(t, stampRules), eval.WithMaxFirings(3))
	const n = 10
	tb := stampWorld(n, "stopped")
	from := tb.rev
	stamped := map[string]string{}
	note := func(p eval.Plan) {
		for _, f := range p.Firings {
			for _, w := range f.Writes {
				stamped[w.Key] = string(w.Value)
			}
		}
		tb.apply(p)
	}
	p := ev.Full(tb)
	if !p.More || len(p.Firings) != 3 {
		t.Fatalf("Full: %d firings, More %v; want 3 cut at the budget", len(p.Firings), p.More)
	}
	note(p)
	for sec := 1; sec < 30 && len(stamped) < n; sec++ {
		c := putKnown(tb, facts.Clock(), stampClock(sec)) // the clock moved on: no dispatch
		p := ev.Continue(from, tb, []facts.Change{c}, false)
		from = tb.rev
		for _, f := range p.Firings {
			if v := string(f.Writes[0].Value); v != stampClock(sec) {
				t.Errorf("%s stamped %s at %s: want the clock of the moment", f.Writes[0].Key, v, stampClock(sec))
			}
		}
		note(p)
		if !p.More {
			break
		}
	}
	if len(stamped) != n {
		t.Fatalf("%d of %d stopped instances stamped; a fresh evaluation fires %d more", len(stamped), n, len(freshFirings(t, tb)))
	}
}

// freshFirings is what a fresh evaluation of the same facts fires.
func freshFirings(t *testing.T, tb *table) []eval.Firing {
	return eval.New(loadSrc(t, stampRules)).Full(tb).Firings
}

// The same with one binding: a round whose time runs out while the task of
// one stopped instance solves its body carries that binding (WithStop
// stands in for the time budget here: it ends the round at the same
// check). The clock then moves on, which does not dispatch the rule: the
// carried binding must still fire in the next call.
func TestStampOneBindingCarriedAcrossClockMove(t *testing.T) {
	cut := false // the round ends at its next check, as once its time is spent
	ev := eval.New(loadSrc(t, stampRules), eval.WithStop(func() bool { return cut }))
	tb := stampWorld(1, "running")
	from := tb.rev
	if p := ev.Full(tb); len(p.Firings) != 0 {
		t.Fatalf("Full: %d firings on a running instance", len(p.Firings))
	}
	cut = true
	c := tb.put(facts.InstanceState("a0000"), `"stopped"`)
	p := ev.Continue(from, tb, []facts.Change{c}, false)
	from = tb.rev
	cut = false
	if len(p.Firings) != 0 || !p.More {
		t.Fatalf("a round cut at its first binding: %d firings, More %v; want none, its binding carried", len(p.Firings), p.More)
	}
	c = putKnown(tb, facts.Clock(), stampClock(1)) // the clock moved on: no dispatch
	p = ev.Continue(from, tb, []facts.Change{c}, false)
	if len(p.Firings) != 1 || string(p.Firings[0].Writes[0].Value) != stampClock(1) {
		t.Fatalf("after the clock moved: %+v; want a0000 stamped with %s (a fresh evaluation fires %d)", p.Firings, stampClock(1), len(freshFirings(t, tb)))
	}
}
