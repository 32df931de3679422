package eval_test

import (
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// placeAndPublish: a pending instance is placed, a placed one published.
const placeAndPublish = placeRule + `
rule "publish" {
  doc       = "Publish where a placed instance is."
  principal = "network"
  match {
    node = "placement/instance/{id}"
    addr = "observed/node/{node}/address"
  }
  emit "endpoint/service/web/{id}" {
    value = "{'ip': addr, 'port': 80}"
  }
}
`

// TestOwnBackSkipsWhatTheRoundEvaluated: a round's writes come back in the
// next call as the round left them: the tasks the round ran for them are
// not run again, and the plan is the one dispatching them in full plans
// (nothing). Come back with another value (another writer's, between),
// the write is a change like any, and the rules that read it act on it.
func TestOwnBackSkipsWhatTheRoundEvaluated(t *testing.T) {
	rs := loadSrc(t, placeAndPublish)
	for _, other := range []bool{false, true} {
		var plans [2]eval.Plan
		var tasks [2]int64
		for i, opts := range [][]eval.Option{nil, {eval.WithoutOwnBack()}} {
			tb := newTable()
			tb.put(facts.InstanceState("a8f31"), `"pending"`)
			tb.put(facts.NodeAddress("node-1"), `"10.0.0.1"`)
			tb.put(facts.NodeAddress("node-2"), `"10.0.0.2"`)
			ev := eval.New(rs, opts...)
			from := tb.rev
			p := ev.Full(tb.Table)
			if len(p.Firings) != 2 {
				t.Fatalf("first round: %d firings, want the placement and its endpoint", len(p.Firings))
			}
			// The writes come back as the mirror delivers them: each
			// with what it replaced (nothing).
			var back []facts.Change
			for _, f := range p.Firings {
				for _, w := range f.Writes {
					v := string(w.Value)
					if other && w.Key == facts.Placement("a8f31") {
						v = `"node-2"` // moved by another writer before it came back
					}
					c := tb.put(w.Key, v)
					c.PrevKnown = true
					back = append(back, c)
				}
			}
			before := ev.Stats()
			plans[i] = ev.Continue(from, tb.Table, back, false)
			after := ev.Stats()
			tasks[i] = after.Tasks - before.Tasks
			wantBack := int64(2)
			if other {
				wantBack = 1 // the endpoint came back as written
			}
			if i == 1 {
				wantBack = 0
			}
			if got := after.OwnBack - before.OwnBack; got != wantBack {
				t.Errorf("other writer %v, own-back %v: %d writes taken as come back, want %d", other, i == 0, got, wantBack)
			}
		}
		if len(plans[0].Firings) != len(plans[1].Firings) {
			t.Fatalf("other writer %v: %d firings with writes come back skipped, %d dispatched in full", other, len(plans[0].Firings), len(plans[1].Firings))
		}
		if !other {
			if len(plans[0].Firings) != 0 || tasks[0] != 0 || tasks[1] == 0 {
				t.Errorf("writes come back as written: %d firings, %d tasks (%d dispatched in full): want none, none and some", len(plans[0].Firings), tasks[0], tasks[1])
			}
			continue
		}
		// Moved: the endpoint follows the placement.
		if len(plans[0].Firings) != 1 || plans[0].Firings[0].Rule != "publish" || !strings.Contains(string(plans[0].Firings[0].Writes[0].Value), "10.0.0.2") {
			t.Errorf("placement moved before it came back: plan %+v, want the endpoint at node-2", plans[0].Firings)
		}
	}
}

// TestOwnBackDispatchesInFullAfterAProblem: a rule stopped in a round by a
// problem (over its CEL cost limit under one binding) has the rest of its tasks
// dropped, those the round's writes made among them. When the writes come
// back they are dispatched in full, so that the stopped rule acts on them:
// the instance whose endpoint evaluates gets it.
func TestOwnBackDispatchesInFullAfterAProblem(t *testing.T) {
	// A rule over its CEL cost limit under a binding is stopped for the
	// round: every binding would burn the budget.
	long := strings.Repeat("1, ", 200) + "1"
	src := strings.Replace(placeAndPublish, `emit "endpoint/service/web/{id}" {`,
		`when = "id != 'a8f31' || [`+long+`].all(x, x > 0)"
  emit "endpoint/service/web/{id}" {`, 1)
	rs := loadSrc(t, src, rules.WithCostLimit(100))
	tb := newTable()
	tb.put(facts.InstanceState("a8f31"), `"pending"`) // its endpoint costs too much
	tb.put(facts.InstanceState("b0000"), `"pending"`)
	tb.put(facts.NodeAddress("node-1"), `"10.0.0.1"`)
	ev := eval.New(rs)
	from := tb.rev
	p := ev.Full(tb.Table)
	if len(p.Problems) == 0 || len(p.Firings) != 2 {
		t.Fatalf("first round: %d firings, problems %v: want both placed, publish stopped at a8f31", len(p.Firings), p.Problems)
	}
	// b0000's placement comes back as written (a8f31's is not back yet).
	var back []facts.Change
	for _, f := range p.Firings {
		if k := f.Writes[0].Key; k == facts.Placement("b0000") {
			c := tb.put(k, string(f.Writes[0].Value))
			c.PrevKnown = true
			back = append(back, c)
		}
	}
	p = ev.Continue(from, tb.Table, back, false)
	if len(p.Firings) != 1 || p.Firings[0].Writes[0].Key != "endpoint/service/web/b0000" {
		t.Errorf("after the placement came back: plan %+v, problems %v: want b0000's endpoint, which the stopped rule never evaluated", p.Firings, p.Problems)
	}
}

// TestOwnBackNotAfterUncommitted: once the engine says a plan did not
// commit in full (Uncommitted), what comes back is not known to be that
// plan's: its writes are dispatched in full, and the rules that read them
// evaluate again.
func TestOwnBackNotAfterUncommitted(t *testing.T) {
	rs := loadSrc(t, placeAndPublish)
	for _, uncommitted := range []bool{false, true} {
		tb := newTable()
		tb.put(facts.InstanceState("a8f31"), `"pending"`)
		tb.put(facts.NodeAddress("node-1"), `"10.0.0.1"`)
		ev := eval.New(rs)
		from := tb.rev
		p := ev.Full(tb.Table)
		if uncommitted {
			ev.Uncommitted()
		}
		var back []facts.Change
		for _, f := range p.Firings {
			for _, w := range f.Writes {
				c := tb.put(w.Key, string(w.Value))
				c.PrevKnown = true
				back = append(back, c)
			}
		}
		before := ev.Stats()
		ev.Continue(from, tb.Table, back, false)
		after := ev.Stats()
		ownBack, tasks := after.OwnBack-before.OwnBack, after.Tasks-before.Tasks
		if uncommitted && (ownBack != 0 || tasks == 0) {
			t.Errorf("after Uncommitted: %d writes taken as come back, %d tasks: want none, and the readers evaluated", ownBack, tasks)
		}
		if !uncommitted && ownBack != 2 {
			t.Errorf("committed: %d writes taken as come back, want 2", ownBack)
		}
	}
}
