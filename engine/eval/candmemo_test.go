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
	with := eval.New(rs, eval.WithSeed(1))
	p := with.Full(tb)
	without := eval.New(rs, eval.WithSeed(1), eval.WithoutCandidateMemo()).Full(tb)
	if !reflect.DeepEqual(ruletest.ReadsSorted(p.Firings), ruletest.ReadsSorted(without.Firings)) {
		t.Errorf("with the memo:\n%v\nwithout:\n%v", p.Firings, without.Firings)
	}
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
