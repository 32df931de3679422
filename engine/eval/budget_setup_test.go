package eval_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// setupRound builds a table, evaluates it in full, and returns the batch
// of the next round: 30 services for the cheap rule "late" to copy (30
// tasks) among 200,000 changes no rule reads, which the round dispatches
// before any rule runs.
func setupRound(t *testing.T, ev *eval.Evaluator) (*table, int64, []facts.Change) {
	t.Helper()
	tb := newTable()
	ev.Full(tb.Table)
	from := tb.Rev()
	var changes []facts.Change
	for i := 0; i < 200_000; i++ {
		changes = append(changes, tb.put(fmt.Sprintf("observed/instance/%05x/image", i), `"nginx:1.28"`))
	}
	for i := 0; i < 30; i++ {
		changes = append(changes, tb.put(fmt.Sprintf("desired/service/s%02d/instances", i), `3`))
	}
	return tb, from, changes
}

// The round's time bound (WithRoundBudget: four rule budgets) is what its
// rules' tasks spent, not the round's setup: dispatching a large batch
// (agents' reports at 100,000 instances on a loaded machine) took longer
// than the bound, and every round then ended after its first task, so a
// rule late in the rotation waited minutes for its turn (services'
// instances were created one service every few minutes). Here the round
// takes five times the bound, most of it the dispatch, and the 30 cheap
// tasks all run in it.
func TestRoundBoundIsTheRulesTime(t *testing.T) {
	rs := loadSrc(t, budgetRules)
	// A task descheduled for the whole bound on a loaded machine ends the
	// round early however the bound is counted: a round that runs every
	// task once in three tries shows the setup is not counted. Counted,
	// the setup alone spends the bound in every try.
	var last string
	for try := 0; try < 3; try++ {
		// How long the round takes with no budget: most of it the
		// dispatch of 200,000 changes.
		ev := eval.New(rs)
		tb, from, changes := setupRound(t, ev)
		start := time.Now()
		p := ev.Continue(from, tb.Table, changes, false)
		took := time.Since(start)
		if len(p.Firings) != 30 || p.More {
			t.Fatalf("without a budget the round planned %d firings (more: %v), want the 30 effective counts", len(p.Firings), p.More)
		}
		// A rule budget of a twentieth of that: the round's bound (four)
		// is a fifth of the setup, and far above the 30 tasks' own time.
		ev = eval.New(rs, eval.WithRoundBudget(0, took/20))
		tb, from, changes = setupRound(t, ev)
		p = ev.Continue(from, tb.Table, changes, false)
		if len(p.Firings) == 30 && !p.More {
			return
		}
		last = fmt.Sprintf("with a rule budget of %s (the round took %s without one) the round planned %d of the 30 firings (more: %v)",
			took/20, took, len(p.Firings), p.More)
		t.Log(last)
	}
	t.Errorf("%s in each of 3 tries: its setup was counted against its bound", last)
}
