package eval_test

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
)

// pendingOfServices is the scheduler's body in small: every pending
// instance of a service that exists.
const pendingOfServices = `
rule "mark" {
  doc       = "Every pending instance of an existing service is noted."
  principal = "scheduler"
  match {
    exists = "desired/service/{svc}"
    svc    = "observed/instance/{id}/service"
    state  = "observed/instance/{id}/state"
  }
  when = "state == 'pending'"
  emit "placement/instance/{id}" { value = "'node-1'" }
}
`

// TestJoinWeighsAScanByWhatFollows: evaluated whole, the rule starts from
// the pending instances, not from the services, though there are fewer
// services: each service leads to all its instances, running or not, and
// the pending are fewer than the instances. The facts visited stay near
// the pending instances' count, not the instances'.
func TestJoinWeighsAScanByWhatFollows(t *testing.T) {
	rs := loadSrc(t, pendingOfServices)
	tb := newTable()
	const services, perService, pending = 50, 40, 100
	for s := range services {
		svc := fmt.Sprintf("svc-%02d", s)
		tb.put("desired/service/"+svc, `{}`)
		for i := range perService {
			id := fmt.Sprintf("%02x%03x", s, i)
			tb.put("observed/instance/"+id+"/service", `"`+svc+`"`)
			state := `"running"`
			if (s*perService+i)%(services*perService/pending) == 0 {
				state = `"pending"`
			}
			tb.put("observed/instance/"+id+"/state", state)
		}
	}
	ev := eval.New(rs)
	p := ev.Full(tb)
	if len(p.Firings) != pending {
		t.Fatalf("%d firings, want one for each of the %d pending instances", len(p.Firings), pending)
	}
	visited := ev.Stats().FactsVisited
	t.Logf("facts visited: %d (%d services, %d instances, %d pending)", visited, services, services*perService, pending)
	if visited > 8*pending+services {
		t.Errorf("visited %d facts: it scanned the instances of every service (%d), want about the pending ones' (%d) few lookups each", visited, services*perService, pending)
	}
}

// runningOnUnreachable starts from the few unreachable nodes, which lead
// to their own placements, not from the running instances, though a scan
// of the nodes' states by value leads on to the placements by an index.
const runningOnUnreachable = `
rule "mark" {
  doc       = "Every running instance on an unreachable node is noted."
  principal = "failure"
  match {
    st     = "observed/node/{node}/state"
    node   = "placement/instance/{id}"
    istate = "observed/instance/{id}/state"
  }
  when = "st == 'unreachable' && istate == 'running'"
  emit "observed/instance/{id}/disowned" { value = "node" }
}
`

// TestJoinWeighsAHintByItsShare: the unreachable nodes' placements are
// their share of the placements (3 of 100 nodes: 60 of 2,000), not all of
// them divided among the three.
func TestJoinWeighsAHintByItsShare(t *testing.T) {
	rs := loadSrc(t, runningOnUnreachable)
	tb := newTable()
	const nodes, instances, unreachable = 100, 2000, 3
	for n := range nodes {
		state := `"alive"`
		if n < unreachable {
			state = `"unreachable"`
		}
		tb.put(fmt.Sprintf("observed/node/n%03d/state", n), state)
	}
	for i := range instances {
		id := fmt.Sprintf("%05x", i)
		tb.put("placement/instance/"+id, fmt.Sprintf(`"n%03d"`, i%nodes))
		tb.put("observed/instance/"+id+"/state", `"running"`)
	}
	ev := eval.New(rs)
	p := ev.Full(tb)
	want := unreachable * instances / nodes
	if len(p.Firings) != want {
		t.Fatalf("%d firings, want the %d running instances on unreachable nodes", len(p.Firings), want)
	}
	visited := ev.Stats().FactsVisited
	t.Logf("facts visited: %d (%d nodes, %d unreachable, %d instances)", visited, nodes, unreachable, instances)
	if visited > int64(8*want+unreachable) {
		t.Errorf("visited %d facts, want about the %d placements on the unreachable nodes' few lookups each", visited, want)
	}
}
