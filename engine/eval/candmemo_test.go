package eval_test

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// pairs places each pending instance on the node with the fewest pairs of
// instances placed there: its aggregate joins the placements twice, so a
// placement cannot adjust it and drops the node's count instead.
const pairs = `rule "pairs" {
  doc       = "Every pending instance is placed on the node with the fewest pairs of placed instances."
  principal = "scheduler"
  match { state = "observed/instance/{id}/state" }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match { nstate = "observed/node/{node}/state" }
    aggregate "pairs" {
      match {
        node  = "placement/instance/{j}"
        node2 = "placement/instance/{k}"
      }
      where = "node2 == node"
      count = true
    }
    filters { alive = "nstate == 'alive'" }
    score = "-double(pairs)"
  }
  emit "placement/instance/{id}" { value = "node" }
}
`

// fullWithAndWithoutMemo evaluates everything on tb with the candidate
// memo and without it, fails t unless both plan the same firings, and
// returns the evaluator with the memo and its plan.
func fullWithAndWithoutMemo(t *testing.T, rs *rules.RuleSet, tb *table) (*eval.Evaluator, eval.Plan) {
	t.Helper()
	with := eval.New(rs, eval.WithSeed(1))
	p := with.Full(tb)
	without := eval.New(rs, eval.WithSeed(1), eval.WithoutCandidateMemo()).Full(tb)
	if !reflect.DeepEqual(ruletest.ReadsSorted(p.Firings), ruletest.ReadsSorted(without.Firings)) {
		t.Fatalf("with the memo:\n%v\nwithout:\n%v", p.Firings, without.Firings)
	}
	return with, p
}

// TestCandidateMemoSeesDroppedGroups: a kept candidate outcome is served
// again only while each aggregate it read, looked up again, has the value
// it had; a placement that drops the node's count (it cannot adjust it)
// is seen as surely as one that adjusts it: the plan is the one evaluating
// every candidate gives, two instances a node. Served from before any
// placement, the first node's outcome would take every instance.
func TestCandidateMemoSeesDroppedGroups(t *testing.T) {
	rs := loadSrc(t, pairs)
	tb := newTable()
	for i := 1; i <= 4; i++ {
		tb.put(facts.NodeState(fmt.Sprintf("node-%d", i)), `"alive"`)
	}
	for i := range 8 {
		tb.put(facts.InstanceState(fmt.Sprintf("%05x", i)), `"pending"`)
	}
	with, p := fullWithAndWithoutMemo(t, rs, tb)
	perNode := map[string]int{}
	for _, f := range p.Firings {
		perNode[string(f.Writes[0].Value)]++
	}
	if len(perNode) != 4 || slices.ContainsFunc(slices.Collect(maps.Values(perNode)), func(n int) bool { return n != 2 }) {
		t.Errorf("placed %v; want two on each of the 4 nodes", perNode)
	}
	if with.Stats().CandidatesReused == 0 {
		t.Error("no outcome was served: the test shows nothing")
	}
}

// spreadBySvc places each pending instance on the node with the fewest of its
// service's instances: what a candidate's evaluation reads of its service
// is an aggregate of the (node, service) group, so the services share
// their candidates' outcomes, which differ by that count alone.
const spreadBySvc = `rule "spread" {
  doc       = "Every pending instance is placed on the node with the fewest instances of its service."
  principal = "scheduler"
  match {
    state = "observed/instance/{id}/state"
    svc   = "observed/instance/{id}/service"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match { nstate = "observed/node/{node}/state" }
    aggregate "mine" {
      match {
        node = "placement/instance/{j}"
        jsvc = "observed/instance/{j}/service"
      }
      where = "jsvc == svc"
      count = true
    }
    filters { alive = "nstate == 'alive'" }
    score = "-double(mine)"
  }
  emit "placement/instance/{id}" { value = "node" }
}
`

// TestCandidateMemoServesAnyKeptOutcome: two services whose instances
// alternate visit the same nodes, one with an instance on every node and
// one with none, so a node's newest outcome is usually the other
// service's. Serving tries each kept outcome whose values still hold, not
// only the newest: after each service's first placement, a placement
// evaluates at most the node the service's last one chose, and the plan
// is the one evaluating every candidate gives.
func TestCandidateMemoServesAnyKeptOutcome(t *testing.T) {
	rs := loadSrc(t, spreadBySvc)
	tb := newTable()
	const nodes, pending = 4, 40
	for i := 1; i <= nodes; i++ {
		node := fmt.Sprintf("node-%d", i)
		tb.put(facts.NodeState(node), `"alive"`)
		id := fmt.Sprintf("a%04d", i) // web's instance already on the node
		tb.put(facts.InstanceService(id), `"web"`)
		tb.put(facts.InstanceState(id), `"running"`)
		tb.put(facts.Placement(id), `"`+node+`"`)
	}
	for i := range pending {
		id, svc := fmt.Sprintf("b%04d", i), []string{"web", "db"}[i%2]
		tb.put(facts.InstanceService(id), `"`+svc+`"`)
		tb.put(facts.InstanceState(id), `"pending"`)
	}
	with, p := fullWithAndWithoutMemo(t, rs, tb)
	if len(p.Firings) != pending {
		t.Fatalf("%d placements, want %d", len(p.Firings), pending)
	}
	// Each service's first placement evaluates every node; a later one
	// only the node its service's last placement chose (between two
	// visits of a node by a service, nothing else changed the count it
	// reads). Serving only the newest outcome, none is served here.
	served, least := with.Stats().CandidatesReused, int64(pending*nodes-2*nodes-(pending-2))
	if served < least {
		t.Errorf("%d of the %d candidates served again, want at least %d", served, pending*nodes, least)
	}
	t.Logf("%d of the %d candidates served again (at least %d)", served, pending*nodes, least)
}
