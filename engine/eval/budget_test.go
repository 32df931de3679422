package eval_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
)

const budgetRules = `
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
