package eval_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// holeFilling places each pending instance on an alive node with room: an
// action that emits the placement its body requires absent, choosing among
// nodes whose count of placements is part of the choice.
const holeFilling = `
rule "place" {
  doc       = "Every pending instance is placed on an alive node with room for it."
  principal = "scheduler"
  match {
    svc = "observed/instance/{id}/service"
    st  = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when = "st == 'pending'"
  choose "node" {
    match {
      nst = "observed/node/{node}/state"
      cap = "observed/node/{node}/capacity/cpu"
    }
    aggregate "used" {
      match {
        node = "placement/instance/{j}"
      }
      count = true
    }
    filters {
      alive = "nst == 'alive'"
      room  = "double(used) < cap"
    }
    score = "-double(used)"
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`

// holeFillingIndexed is holeFilling with one more head, as schedule
// writes the placement's entry by node beside it: a binding that fires
// still stops holding.
var holeFillingIndexed = strings.Replace(holeFilling, `  emit "placement/instance/{id}" {
    value = "node"
  }`, `  emit "placement/instance/{id}" {
    value = "node"
  }
  emit "placement/node/{node}/{id}" {
    value = "svc"
  }`, 1)

func addNode(tb *table, node string, capacity int) []facts.Change {
	return []facts.Change{
		putKnown(tb, "observed/node/"+node+"/state", `"alive"`),
		putKnown(tb, "observed/node/"+node+"/capacity/cpu", fmt.Sprint(capacity)),
	}
}

func addInstance(tb *table, id string) []facts.Change {
	return []facts.Change{
		putKnown(tb, "observed/instance/"+id+"/service", `"web"`),
		putKnown(tb, "observed/instance/"+id+"/state", `"pending"`),
	}
}

func placedBy(p eval.Plan) int {
	n := 0
	for _, f := range p.Firings {
		if f.Rule == "place" {
			n++
		}
	}
	return n
}

// TestCandidateChangeEvaluatesTheWaiting: when a node is added, only the
// instances that found no node are evaluated again, not every instance of
// the cluster; and they are placed.
func TestCandidateChangeEvaluatesTheWaiting(t *testing.T) {
	for name, src := range map[string]string{"one head": holeFilling, "two heads": holeFillingIndexed} {
		t.Run(name, func(t *testing.T) { candidateChangeEvaluatesTheWaiting(t, src) })
	}
}

func candidateChangeEvaluatesTheWaiting(t *testing.T, src string) {
	if !strings.Contains(src, `emit "placement/instance/{id}"`) {
		t.Fatal("the rule lost its hole-filling head")
	}
	rs := loadSrc(t, src)
	tb := newTable()
	addNode(tb, "node-1", 198)
	for i := range 200 {
		addInstance(tb, fmt.Sprintf("a%04x", i))
	}
	ev := eval.New(rs)
	from := tb.Rev()
	p := ev.Full(tb)
	if n := placedBy(p); n != 198 {
		t.Fatalf("%d placed, want the 198 node-1 has room for", n)
	}
	changes := applyKnown(tb, p)
	rev := tb.Rev()
	p = ev.Continue(from, tb, changes, false)
	from = rev
	if n := placedBy(p); n != 0 {
		t.Fatalf("the placements coming back placed %d more, want 0", n)
	}
	changes = addNode(tb, "node-2", 10)
	rev = tb.Rev()
	was := ev.Stats()
	p = ev.Continue(from, tb, changes, false)
	after := ev.Stats()
	if n := placedBy(p); n != 2 {
		t.Fatalf("after node-2 arrived %d placed, want the 2 waiting", n)
	}
	for _, f := range p.Firings {
		if f.Bindings["node"] != "node-2" {
			t.Errorf("%s placed on %s, want node-2 (node-1 is full)", f.Bindings["id"], f.Bindings["node"])
		}
	}
	// Evaluating every instance again visits each of the 200.
	if v := after.FactsVisited - was.FactsVisited; v >= 200 {
		t.Errorf("the node's arrival visited %d facts, want fewer than the 200 instances: only the waiting ones", v)
	}
	_ = rev
}

// TestUncommittedFiringIsEvaluatedAgain: a placement that did not commit
// leaves its instance unplaced although the evaluator saw it fire; once
// told (Uncommitted), the next candidate change places it again.
func TestUncommittedFiringIsEvaluatedAgain(t *testing.T) {
	rs := loadSrc(t, holeFilling)
	tb := newTable()
	addNode(tb, "node-1", 1)
	addInstance(tb, "a0001")
	addInstance(tb, "a0002")
	ev := eval.New(rs)
	from := tb.Rev()
	p := ev.Full(tb)
	if n := placedBy(p); n != 1 {
		t.Fatalf("%d placed, want 1 (node-1 has room for one)", n)
	}
	ev.Uncommitted() // the placement is dropped: nothing is applied
	changes := addNode(tb, "node-2", 5)
	p = ev.Continue(from, tb, changes, false)
	if n := placedBy(p); n != 2 {
		t.Fatalf("after node-2 arrived %d placed, want both: the uncommitted one too", n)
	}
}

// TestWaitingLeavesNothingPlaceable: under random arrivals and departures
// of nodes and instances, evaluated incrementally with some plans dropped,
// a full evaluation of the final facts finds nothing left to place.
func TestWaitingLeavesNothingPlaceable(t *testing.T) {
	rs := loadSrc(t, holeFilling)
	for seed := uint64(0); seed < 60; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		tb := newTable()
		ev := eval.New(rs, eval.WithSeed(seed))
		from := tb.Rev()
		var changes []facts.Change
		nodes, ids := 0, 0
		for step := 0; step < 30; step++ {
			switch r.IntN(5) {
			case 0:
				nodes++
				changes = append(changes, addNode(tb, fmt.Sprintf("node-%d", nodes), r.IntN(4))...)
			case 1:
				if nodes > 0 {
					n := fmt.Sprintf("node-%d", 1+r.IntN(nodes))
					changes = append(changes, putKnown(tb, "observed/node/"+n+"/state", []string{`"alive"`, `"down"`}[r.IntN(2)]))
				}
			case 2:
				if ids > 0 {
					k := fmt.Sprintf("placement/instance/a%04x", r.IntN(ids))
					if old, ok := tb.Delete(k); ok {
						tb.rev++
						tb.SetRev(tb.rev)
						changes = append(changes, facts.Change{Fact: old, Deleted: true, PrevKnown: true, Prev: old.Value})
					}
				}
			default:
				for range 1 + r.IntN(3) {
					changes = append(changes, addInstance(tb, fmt.Sprintf("a%04x", ids))...)
					ids++
				}
			}
			rev := tb.Rev()
			p := ev.Continue(from, tb, changes, false)
			from = rev
			changes = nil
			if p.More {
				t.Fatalf("seed %d: a round left work for the next call without a budget", seed)
			}
			if r.IntN(6) == 0 && len(p.Firings) > 0 {
				// The plan is lost, as when its guards fail: the engine
				// says so and evaluates what the firings read again.
				ev.Uncommitted()
				p = ev.Incremental(tb, readAgain(tb, p))
				from = tb.Rev()
			}
			changes = applyKnown(tb, p)
		}
		for settle := 0; len(changes) > 0; settle++ {
			if settle > 10 {
				t.Fatalf("seed %d: no fixpoint", seed)
			}
			rev := tb.Rev()
			p := ev.Continue(from, tb, changes, false)
			from = rev
			changes = applyKnown(tb, p)
		}
		if p := eval.New(rs).Full(tb); placedBy(p) != 0 {
			t.Fatalf("seed %d: a full evaluation still places %d instances the incremental one left waiting", seed, placedBy(p))
		}
	}
}

// TestBurstIsEvaluatedWhole: many instances arriving at once are placed by
// one evaluation of the rule, not by a task each (each task pays its setup
// and a rule's budget is checked between tasks).
func TestBurstIsEvaluatedWhole(t *testing.T) {
	rs := loadSrc(t, holeFilling)
	tb := newTable()
	addNode(tb, "node-1", 1000)
	ev := eval.New(rs)
	from := tb.Rev()
	ev.Full(tb)
	var changes []facts.Change
	for i := range 600 {
		changes = append(changes, addInstance(tb, fmt.Sprintf("a%04x", i))...)
	}
	was := ev.Stats()
	p := ev.Continue(from, tb, changes, false)
	if n := placedBy(p); n != 600 {
		t.Fatalf("%d placed, want 600", n)
	}
	if tasks := ev.Stats().Tasks - was.Tasks; tasks > 300 {
		t.Errorf("%d tasks for a burst of 600 instances, want it evaluated whole (at most the burst's threshold)", tasks)
	}
}

// TestReportsDoNotEvaluateWhole: a few hundred reports of placed instances
// (each a task that finds its instance placed) do not evaluate the rule
// whole, which would visit every pending instance.
func TestReportsDoNotEvaluateWhole(t *testing.T) {
	rs := loadSrc(t, holeFilling)
	tb := newTable()
	addNode(tb, "node-1", 100000)
	for i := range 6000 {
		id := fmt.Sprintf("a%04x", i)
		addInstance(tb, id)
		putKnown(tb, "placement/instance/"+id, `"node-1"`)
	}
	ev := eval.New(rs)
	from := tb.Rev()
	ev.Full(tb)
	var changes []facts.Change
	for i := range 300 {
		changes = append(changes, putKnown(tb, fmt.Sprintf("observed/instance/a%04x/state", i), `"running"`))
	}
	was := ev.Stats()
	p := ev.Continue(from, tb, changes, false)
	if n := placedBy(p); n != 0 {
		t.Fatalf("%d placed, want none: every instance is placed", n)
	}
	if v := ev.Stats().FactsVisited - was.FactsVisited; v >= 5700 {
		t.Errorf("300 reports visited %d facts: the rule was evaluated whole over the 5,700 pending instances", v)
	}
}

// zoned places an instance only on a node of its zone: an instance of a
// zone without nodes waits.
const zoned = `
rule "place" {
  doc       = "Every pending instance is placed on a node of its zone."
  principal = "scheduler"
  match {
    st   = "observed/instance/{id}/state"
    svc  = "observed/instance/{id}/service"
    zone = "desired/service/{svc}/placement/zone"
  }
  absent = ["placement/instance/{id}"]
  when = "st == 'pending'"
  choose "node" {
    match {
      nzone = "observed/node/{node}/zone"
    }
    filters {
      zone = "nzone == zone"
    }
    score = "0.0"
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`

// A whole evaluation cut at the round's budget goes on where it stopped
// when the rule is evaluated whole again, rather than starting over: with
// two thousand instances that cannot be placed first in its order, one
// that started over every time never reached the ones that can.
func TestWholeEvaluationResumesWhereItWasCut(t *testing.T) {
	rs := loadSrc(t, zoned)
	tb := newTable()
	for i := range 200 { // each instance that cannot be placed looks at every one
		putKnown(tb, fmt.Sprintf("observed/node/node-%d/zone", i), `"z1"`)
	}
	putKnown(tb, "desired/service/far/placement/zone", `"z9"`) // no such node
	putKnown(tb, "desired/service/near/placement/zone", `"z1"`)
	for i := range 2000 {
		id := fmt.Sprintf("a%04x", i)
		putKnown(tb, "observed/instance/"+id+"/state", `"pending"`)
		putKnown(tb, "observed/instance/"+id+"/service", `"far"`)
	}
	for i := range 50 {
		id := fmt.Sprintf("b%04x", i)
		putKnown(tb, "observed/instance/"+id+"/state", `"pending"`)
		putKnown(tb, "observed/instance/"+id+"/service", `"near"`)
	}
	// The round's bound (four rule budgets) is a fifth of what evaluating
	// every binding takes on this machine, solving them included.
	start := time.Now()
	if p := eval.New(rs).Full(tb); placedBy(p) != 50 {
		t.Fatalf("without a budget %d placed, want 50", placedBy(p))
	}
	ev := eval.New(rs, eval.WithRoundBudget(0, time.Since(start)/20))
	placed, cut := 0, false
	for round := 0; placed < 50; round++ {
		if round == 100 {
			t.Fatalf("%d of 50 placeable instances placed after %d whole evaluations", placed, round)
		}
		p := ev.Full(tb) // the rule whole, every round
		cut = cut || p.More
		placed += placedBy(p)
		applyKnown(tb, p)
	}
	if !cut {
		t.Fatal("no round was cut at its budget: the test shows nothing")
	}
}

// readAgain returns what the firings of a lost plan read, as the facts
// stand, as changes: what the engine evaluates again after a drop.
func readAgain(tb *table, p eval.Plan) []facts.Change {
	var again []facts.Change
	for _, f := range p.Firings {
		for _, rd := range f.Reads {
			if fact, ok := tb.Get(rd.Key); ok {
				again = append(again, facts.Change{Fact: fact})
			} else {
				again = append(again, facts.Change{Fact: facts.Fact{Key: rd.Key}, Deleted: true})
			}
		}
	}
	return again
}
