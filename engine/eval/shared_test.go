package eval_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// sharedCount is a shared count read by two rules, and by a third that
// binds state itself: the count's own state is not the rule's.
const sharedCount = `
counts {
  params  = ["svc"]
  over    = "instance"
  running = "state == 'running'"
}

relation "instance" {
  match {
    svc   = "observed/instance/{i}/service"
    state = "observed/instance/{i}/state"
  }
}

rule "policy_count" {
  doc       = "The policy intent of a service is its running instances."
  principal = "policy"
  match {
    exists = "desired/service/{svc}"
  }
  when = "running > 0"
  derive "intent/policy/service/{svc}/instances" {
    value = "running"
  }
}

rule "user_count" {
  doc       = "The effective count of a service is its running instances."
  principal = "intent-resolver"
  match {
    exists = "desired/service/{svc}"
  }
  derive "effective/service/{svc}/instances" {
    value = "running"
  }
}

rule "per_instance" {
  doc       = "Each instance is told how many of its service run."
  principal = "failure"
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
  }
  when = "state != 'stopped'"
  derive "observed/instance/{id}/disowned" {
    value = "'n' + string(running)"
  }
}
`

// TestSharedAggregateComputedOnce checks that a shared aggregate read by
// several rules is computed once per group, where the same aggregate
// written in each rule is computed once per rule and group.
func TestSharedAggregateComputedOnce(t *testing.T) {
	tb := newTable()
	for s := 0; s < 5; s++ {
		tb.put(facts.DesiredService(fmt.Sprintf("s%d", s)), `{}`)
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("%d%04d", s, i)
			tb.put(facts.InstanceService(id), fmt.Sprintf(`"s%d"`, s))
			tb.put(facts.InstanceState(id), `"running"`)
		}
	}
	// The two service rules alone, reading the shared count or each
	// writing it itself.
	two := sharedCount[:strings.Index(sharedCount, `rule "per_instance"`)]
	// One group at a time, so that the count is of groups.
	shared := eval.New(loadSrc(t, two), eval.WithWholeAggregates(-1))
	shared.Full(tb)
	own := strings.ReplaceAll(two, "  match {\n    exists", ownCount+"  match {\n    exists")
	each := eval.New(loadSrc(t, own), eval.WithWholeAggregates(-1))
	each.Full(tb)
	if got, want := shared.Stats().Aggregates, int64(5); got != want {
		t.Errorf("shared: %d groups computed, want %d (one per service)", got, want)
	}
	if got := each.Stats().Aggregates; got != 10 {
		t.Errorf("written in each rule: %d groups computed, want 10 (one per service and rule)", got)
	}
}

// ownCount is the shared count written in a rule, shadowing it.
const ownCount = `  aggregate "running" {
    match {
      svc   = "observed/instance/{i}/service"
      state = "observed/instance/{i}/state"
    }
    where = "state == 'running'"
    count = true
  }
`

// TestSharedAggregateIncremental changes instances at random and checks,
// after each change, every view against counts made here from the facts:
// the rule binding state must see the count of all its service's running
// instances, not of those in its own state, also when a change reaches it
// through the aggregate's patterns. With Continue the results are kept
// across rounds and adjusted for each change: once per change, though
// three rules read them.
func TestSharedAggregateIncremental(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("kept=%v", keep), func(t *testing.T) { sharedIncremental(t, keep) })
	}
}

func sharedIncremental(t *testing.T, keep bool) {
	rs := loadSrc(t, sharedCount)
	for seed := uint64(0); seed < 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		tb := newTable()
		ev := eval.New(rs)
		from := int64(-1)
		next := func(changes []facts.Change) eval.Plan {
			if !keep {
				return ev.Incremental(tb, changes)
			}
			rev := tb.Rev()
			p := ev.Continue(from, tb, changes, false)
			from = rev
			return p
		}
		settle := func(p eval.Plan) {
			for n := 0; n < 20 && len(p.Firings) > 0; n++ {
				if len(p.Problems) > 0 {
					t.Fatalf("seed %d: problems %v", seed, p.Problems)
				}
				p = next(tb.apply(p)) // views only: no kept result reads them
			}
		}
		for s := 0; s < 2; s++ {
			tb.put(facts.DesiredService(fmt.Sprintf("s%d", s)), `{}`)
		}
		p := ev.Full(tb)
		from = tb.Rev()
		settle(p)
		states := []string{"running", "pending", "stopped"}
		for step := 0; step < 30; step++ {
			id := fmt.Sprintf("a000%d", r.IntN(6))
			key, val := facts.InstanceService(id), fmt.Sprintf(`"s%d"`, r.IntN(2))
			if r.IntN(2) == 0 {
				key, val = facts.InstanceState(id), `"`+states[r.IntN(3)]+`"`
			}
			prev, had := tb.Get(key)
			ch := tb.put(key, val)
			ch.PrevKnown = true
			if had {
				ch.Prev = prev.Value
			}
			settle(next([]facts.Change{ch}))
			running := map[string]int{}
			for i := 0; i < 6; i++ {
				id := fmt.Sprintf("a000%d", i)
				svc, ok1 := tb.Get(facts.InstanceService(id))
				st, ok2 := tb.Get(facts.InstanceState(id))
				if ok1 && ok2 && string(st.Value) == `"running"` {
					running[strings.Trim(string(svc.Value), `"`)]++
				}
			}
			for i := 0; i < 6; i++ {
				id := fmt.Sprintf("a000%d", i)
				svc, ok1 := tb.Get(facts.InstanceService(id))
				st, ok2 := tb.Get(facts.InstanceState(id))
				got, derived := tb.Get(facts.InstanceDisowned(id))
				if !ok1 || !ok2 || string(st.Value) == `"stopped"` {
					if derived {
						t.Fatalf("seed %d step %d: %s derived %s without a live binding", seed, step, id, got.Value)
					}
					continue
				}
				want := fmt.Sprintf(`"n%d"`, running[strings.Trim(string(svc.Value), `"`)])
				if !derived || string(got.Value) != want {
					t.Fatalf("seed %d step %d: %s holds %s, want %s", seed, step, id, got.Value, want)
				}
			}
			for s := 0; s < 2; s++ {
				svc := fmt.Sprintf("s%d", s)
				eff, _ := tb.Get(facts.EffectiveInstances(svc))
				if string(eff.Value) != fmt.Sprint(running[svc]) {
					t.Fatalf("seed %d step %d: effective %s is %s, want %d", seed, step, svc, eff.Value, running[svc])
				}
			}
		}
	}
}

// TestSharedAggregateInChoice places instances with a shared count grouped
// by the candidate node: read-your-writes keeps it right inside the round,
// so no node takes more than two.
func TestSharedAggregateInChoice(t *testing.T) {
	rs := loadSrc(t, `aggregate "on_node" {
  params = ["node"]
  match { node = "placement/instance/{j}" }
  count  = true
}

rule "place" {
  doc       = "d"
  principal = "scheduler"
  match { state = "observed/instance/{id}/state" }
  absent = ["placement/instance/{id}"]
  choose "node" {
    match { nstate = "observed/node/{node}/state" }
    filters { room = "on_node < 2" }
  }
  emit "placement/instance/{id}" { value = "node" }
}
`)
	tb := newTable()
	tb.put(facts.NodeState("n1"), `"alive"`)
	tb.put(facts.NodeState("n2"), `"alive"`)
	for i := 0; i < 5; i++ {
		tb.put(facts.InstanceState(fmt.Sprintf("a000%d", i)), `"pending"`)
	}
	tb.apply(eval.New(rs).Full(tb))
	per := map[string]int{}
	for i := 0; i < 5; i++ {
		if f, ok := tb.Get(facts.Placement(fmt.Sprintf("a000%d", i))); ok {
			per[string(f.Value)]++
		}
	}
	if per[`"n1"`] != 2 || per[`"n2"`] != 2 || len(per) != 2 {
		t.Errorf("placements per node %v, want two on each and one left pending", per)
	}
}
