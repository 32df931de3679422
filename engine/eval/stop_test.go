package eval_test

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
)

// A round whose caller stops (WithStop) ends at its next binding with its
// work carried (Plan.More), and the next call goes on from there: a
// stopping server is not held up by a long round, and an evaluator that
// goes on after a stop loses nothing.
func TestStopEndsTheRoundAtTheNextBinding(t *testing.T) {
	rs := loadSrc(t, budgetRules)
	tb := newTable()
	const n = 50
	for i := range n {
		tb.put(fmt.Sprintf("observed/instance/a%04x/state", i), `"pending"`)
	}
	stopped := false
	asked := 0
	ev := eval.New(rs, eval.WithStop(func() bool {
		asked++
		return stopped
	}))
	stopped = true
	p := ev.Full(tb)
	if asked == 0 {
		t.Fatal("the round never asked whether to stop")
	}
	if !p.More || len(p.Firings) > 1 {
		t.Fatalf("a stopped round planned %d of %d firings (more %v): want it cut before its second binding, the rest carried", len(p.Firings), n, p.More)
	}
	stopped = false
	from, placed := tb.Rev(), len(p.Firings)
	for round := 0; p.More || len(p.Firings) > 0; round++ {
		if round == 10 {
			t.Fatal("no fixpoint in 10 rounds after the stop")
		}
		rev := tb.Rev()
		changes := tb.apply(p)
		p = ev.Continue(from, tb, changes, false)
		from = rev
		placed += len(p.Firings)
	}
	if placed != n {
		t.Errorf("%d of %d instances placed after the stop was lifted", placed, n)
	}
	for i := range n {
		if _, ok := tb.Get(fmt.Sprintf("placement/instance/a%04x", i)); !ok {
			t.Errorf("a%04x never placed: the stop lost its task", i)
		}
	}
}
