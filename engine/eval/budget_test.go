package eval_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// placeRule places every pending instance on node-1.
const placeRule = `
rule "place" {
  doc       = "Every pending instance is placed on node-1."
  principal = "scheduler"
  match {
    st = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when = "st == 'pending'"
  emit "placement/instance/{id}" {
    value = "'node-1'"
  }
}
`

const budgetRules = placeRule + `
rule "late" {
  doc       = "The effective count follows the desired one."
  principal = "intent-resolver"
  after     = ["place"]
  match {
    n = "desired/service/{name}/instances"
  }
  emit "effective/service/{name}/instances" {
    value = "n"
  }
}
`

// A round cut at its firing budget carries what it did not reach, and the
// next round starts after the rule it was cut in: a rule ordered after one
// with thousands of bindings (endpoints after scheduling) gets its turn in
// the second slice, not after the last.
func TestBudgetDoesNotStarveLaterRules(t *testing.T) {
	rs := loadSrc(t, budgetRules)
	tb := newTable()
	for i := 0; i < 20; i++ {
		tb.put(fmt.Sprintf("observed/instance/a%04x/state", i), `"pending"`)
	}
	tb.put("desired/service/web/instances", `3`)
	ev := eval.New(rs, eval.WithMaxFirings(4))
	from := tb.Rev()
	p := ev.Full(tb)
	var plans [][]string
	for round := 0; ; round++ {
		if round == 20 {
			t.Fatal("no fixpoint in 20 rounds")
		}
		var names []string
		for _, f := range p.Firings {
			names = append(names, f.Rule)
		}
		plans = append(plans, names)
		if len(p.Firings) == 0 && !p.More {
			break
		}
		if len(p.Firings) > 4 {
			t.Fatalf("round %d planned %d firings, over the budget of 4", round, len(p.Firings))
		}
		rev := tb.Rev()
		changes := tb.apply(p)
		p = ev.Continue(from, tb, changes, false)
		from = rev
	}
	if len(plans) < 2 || !slices.Contains(plans[1], "late") {
		t.Errorf("rule late did not fire in the second slice: plans %v", plans)
	}
	placed := 0
	for i := 0; i < 20; i++ {
		if _, ok := tb.Get(fmt.Sprintf("placement/instance/a%04x", i)); ok {
			placed++
		}
	}
	if _, ok := tb.Get("effective/service/web/instances"); !ok || placed != 20 {
		t.Errorf("%d of 20 placed, effective count written: %v; plans %v", placed, ok, plans)
	}
}

// costlyRules has a rule whose guard costs a lot for every one of its many
// bindings, and a cheap rule after it that nothing else waits for.
func costlyRules(n int) string {
	var xs []string
	for i := 0; i < n; i++ {
		xs = append(xs, fmt.Sprint(i))
	}
	list := "[" + strings.Join(xs, ",") + "]"
	return `
rule "costly" {
  doc       = "Every metric is looked at at great cost, and nothing is ever written."
  principal = "autoscaler"
  match {
    m = "observed/service/{name}/metrics/{metric}/{id}"
  }
  # name.contains(id) makes the cost estimate exceed the limit, so the
  # evaluation is cost-tracked: its actual cost is far below the limit.
  when = "` + list + `.all(x, ` + list + `.all(y, x + y >= 0)) && !name.contains(id) && m < 0.0"
  emit "observed/service/{name}/autoscale/recommendation" {
    value = "1"
  }
}
rule "scale" {
  doc       = "The effective count follows the desired one."
  principal = "intent-resolver"
  after     = ["costly"]
  match {
    n = "desired/service/{name}/instances"
  }
  emit "effective/service/{name}/instances" {
    value = "n"
  }
}
`
}

// A round over its time or cost budget commits what it has and goes on in
// the next, which starts after the rule it was cut in: a costly rule over
// many bindings does not hold an unrelated one back until it is done.
func TestRoundBudgetDoesNotStarveOtherRules(t *testing.T) {
	rs := loadSrc(t, costlyRules(120))
	for _, tc := range []struct {
		name string
		opt  eval.Option
	}{
		{"time", eval.WithRoundBudget(0, 20*time.Millisecond)},
		{"cost", eval.WithRoundBudget(200_000, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable()
			for i := 0; i < 200; i++ {
				tb.put(fmt.Sprintf("observed/service/api/metrics/cpu/a%04x", i), `0.5`)
			}
			ev := eval.New(rs, tc.opt)
			p := ev.Full(tb)
			// The cheap rule's input arrives while the costly one still has
			// work: the next round reaches it before the costly rule's rest.
			from := tb.Rev()
			changes := []facts.Change{tb.put("desired/service/web/instances", `3`)}
			if !p.More {
				t.Fatalf("the first round ran all 200 costly bindings: no budget applied")
			}
			rounds := 0
			for {
				rounds++
				rev := tb.Rev()
				p = ev.Continue(from, tb, changes, false)
				from = rev
				changes = tb.apply(p)
				if _, ok := tb.Get("effective/service/web/instances"); ok {
					break
				}
				if !p.More || rounds > 3 {
					t.Fatalf("effective/service/web/instances not written after %d rounds (more: %v)", rounds, p.More)
				}
			}
			if rounds > 1 {
				t.Errorf("the cheap rule fired in round %d after the change, want the first", rounds)
			}
			// And the costly rule's bindings all get their turn.
			finish(t, ev, tb, from, p, 1000)
		})
	}
}

// A rule over its budget waits for the next round; the others do not: the
// round goes on with them, so a costly rule costs its own bindings a
// round, not every rule after it. (The budget is checked between tasks:
// one task over many bindings, as a full evaluation has, runs until the
// round's own bound.) The budget is of CEL cost, which is the same on
// every machine: a time budget here failed on a loaded one, where a
// single costly task under -race outlasted the round's bound.
func TestRuleBudgetLeavesTheRoundToOthers(t *testing.T) {
	rs := loadSrc(t, costlyRules(120))
	tb := newTable()
	ev := eval.New(rs, eval.WithRoundBudget(200_000, 0))
	from := tb.Rev()
	ev.Full(tb)
	var changes []facts.Change
	for i := 0; i < 200; i++ {
		changes = append(changes, tb.put(fmt.Sprintf("observed/service/api/metrics/cpu/a%04x", i), `0.5`),
			tb.put(fmt.Sprintf("desired/service/s%03d/instances", i), `3`))
	}
	p := ev.Continue(from, tb, changes, false)
	byRule := map[string]int{}
	for _, f := range p.Firings {
		byRule[f.Rule]++
	}
	if !p.More {
		t.Fatalf("the round ran all 200 costly bindings (%v): no budget applied", byRule)
	}
	if byRule["scale"] != 200 {
		t.Errorf("the cheap rule after the costly one fired %d times in the round, want all 200 (%v)", byRule["scale"], byRule)
	}
}

// A rule over its budget gets the rest of a round no other rule needs: a
// rule's budget keeps it from starving the others, not from using a round
// they leave idle. Alone with work, the costly rule runs until the round's
// own bound, four rule budgets, rather than one.
func TestIdleRoundGoesToTheRuleOverBudget(t *testing.T) {
	spent := idleRoundCost(t, false)
	if spent < 3*idleBudget {
		t.Errorf("the round spent %d of CEL cost and stopped, want it to go on to its bound of %d while no other rule has work", spent, 4*idleBudget)
	}
	// New facts waiting (WithYield): the round ends at the rule's budget,
	// so that they wait for no more than that.
	if spent := idleRoundCost(t, true); spent >= 2*idleBudget {
		t.Errorf("with facts waiting the round spent %d of CEL cost, want it to end at the rule's budget of %d", spent, idleBudget)
	}
}

const idleBudget = 200_000

// idleRoundCost is the CEL cost the first round after 400 costly bindings
// arrive spends, with new facts waiting all along or never.
func idleRoundCost(t *testing.T, waiting bool) uint64 {
	rs := loadSrc(t, costlyRules(120))
	tb := newTable()
	ev := eval.New(rs, eval.WithRoundBudget(idleBudget, 0), eval.WithYield(func() bool { return waiting }))
	from := tb.Rev()
	ev.Full(tb)
	var changes []facts.Change
	for i := 0; i < 400; i++ {
		changes = append(changes, tb.put(fmt.Sprintf("observed/service/api/metrics/cpu/a%04x", i), `0.5`))
	}
	was := ev.Stats()
	p := ev.Continue(from, tb, changes, false)
	if !p.More {
		t.Fatal("the round ran all 400 costly bindings: no budget applied")
	}
	spent := ev.Stats().Cost - was.Cost
	// The rest is carried, and every binding gets its turn.
	finish(t, ev, tb, from, p, 1000)
	return spent
}

// The bindings a whole evaluation left when the round's bound cut it keep
// the budget they had as one task: the next round runs them to its own
// bound, not to the rule's, even with new facts waiting. Else a rule
// evaluated whole (the scheduler after a burst) would go on at a quarter
// of its pace once cut.
func TestCutWholeEvaluationKeepsItsBudget(t *testing.T) {
	rs := loadSrc(t, costlyRules(120))
	tb := newTable()
	for i := 0; i < 400; i++ {
		tb.put(fmt.Sprintf("observed/service/api/metrics/cpu/a%04x", i), `0.5`)
	}
	ev := eval.New(rs, eval.WithRoundBudget(idleBudget, 0), eval.WithYield(func() bool { return true }))
	from := tb.Rev()
	p := ev.Full(tb) // one task over every binding, cut at the round's bound
	if !p.More {
		t.Fatal("the full round ran all 400 costly bindings: no budget applied")
	}
	was := ev.Stats()
	rev := tb.Rev()
	p = ev.Continue(from, tb, tb.apply(p), false)
	if spent := ev.Stats().Cost - was.Cost; spent < 3*idleBudget {
		t.Errorf("the next round spent %d of CEL cost on the cut evaluation's bindings, want them run to the round's bound of %d", spent, 4*idleBudget)
	}
	finish(t, ev, tb, rev, p, 100)
}

// finish runs rounds from p, each applied before the next, until one
// carries nothing, failing past limit rounds.
func finish(t *testing.T, ev *eval.Evaluator, tb *table, from int64, p eval.Plan, limit int) {
	t.Helper()
	for n := 0; p.More; n++ {
		if n > limit {
			t.Fatal("the costly rule never finished")
		}
		rev := tb.Rev()
		p = ev.Continue(from, tb, tb.apply(p), false)
		from = rev
	}
}
