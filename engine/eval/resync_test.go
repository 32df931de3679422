package eval_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
)

// Resync plans every firing of a full evaluation in one plan, whatever the
// round's bounds, and leaves them in force for the rounds after it: what
// it finds at rest is counted whole, not a first slice of it.
func TestResyncPlansEverythingAndKeepsTheBudgets(t *testing.T) {
	rs := loadSrc(t, budgetRules)
	tb := newTable()
	for i := 0; i < 20; i++ {
		tb.put(fmt.Sprintf("observed/instance/a%04x/state", i), `"pending"`)
	}
	tb.put("desired/service/web/instances", `3`)
	ev := eval.New(rs, eval.WithMaxFirings(4), eval.WithRoundBudget(1, time.Nanosecond), eval.WithYield(func() bool { return true }))

	if p := ev.Full(tb); len(p.Firings) > 4 || !p.More {
		t.Fatalf("Full planned %d firings (more: %v): want the budget of 4 and more", len(p.Firings), p.More)
	}
	p := ev.Resync(tb)
	if len(p.Firings) != 21 || p.More {
		t.Fatalf("Resync planned %d firings (more: %v): want all 21 (20 placements, 1 count) and no more", len(p.Firings), p.More)
	}

	// The bounds are back: a round after it is cut again.
	from := tb.Rev()
	changes := tb.apply(p)
	changes = append(changes, tb.put("desired/service/web/instances", `5`))
	for i := 20; i < 30; i++ {
		changes = append(changes, tb.put(fmt.Sprintf("observed/instance/a%04x/state", i), `"pending"`))
	}
	p = ev.Continue(from, tb, changes, false)
	if len(p.Firings) > 4 || !p.More {
		t.Errorf("the round after Resync planned %d firings (more: %v): want the budget of 4 and more", len(p.Firings), p.More)
	}
}
