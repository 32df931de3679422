package eval_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// spread places each pending instance on the node with the fewest
// instances of its service: the default scheduler's siblings, alone.
const spread = `rule "spread" {
  doc       = "Every pending instance is placed on the node with the fewest instances of its service."
  principal = "scheduler"
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match {
      nstate = "observed/node/{node}/state"
    }
    aggregate "siblings" {
      match {
        node = "placement/instance/{j}"
        svc  = "observed/instance/{j}/service"
      }
      count = true
    }
    filters {
      alive = "nstate == 'alive'"
    }
    score = "-double(siblings)"
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`

// TestWholeAggregate: placing 120 instances of 10 services on 60 nodes
// that run 600 of other services asks for a (node, service) group per
// candidate, nearly all of them empty.
// Computed whole, the round finds every group in one pass and answers the
// empty ones without a scan: the same plan, far fewer groups computed one
// at a time and facts visited.
func TestWholeAggregate(t *testing.T) {
	rs, _, diags := rules.LoadFilesWithSources(map[string][]byte{"spread.hcl": []byte(spread)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	world := func() *facts.Table {
		tb := facts.NewTable(nil)
		rev := int64(0)
		put := func(k, v string) {
			rev++
			tb.Put(facts.Fact{Key: k, Value: []byte(v), ModRevision: rev, CreateRevision: rev})
		}
		for i := 1; i <= 60; i++ {
			put(facts.NodeState(fmt.Sprintf("node-%02d", i)), `"alive"`)
		}
		// Ten instances of other services on each node already: a group
		// computed on its own scans the node's ten placements.
		for i := range 600 {
			id := fmt.Sprintf("%05x", 0x10000+i) // instance ids are hex
			put(facts.InstanceService(id), fmt.Sprintf(`"old-%d"`, i%20))
			put(facts.InstanceState(id), `"running"`)
			put(facts.Placement(id), fmt.Sprintf(`"node-%02d"`, i%60+1))
		}
		for i := range 120 {
			id := fmt.Sprintf("%05x", i)
			put(facts.InstanceService(id), fmt.Sprintf(`"svc-%d"`, i%10))
			put(facts.InstanceState(id), `"pending"`)
		}
		tb.SetRev(rev)
		return tb
	}
	run := func(opts ...eval.Option) (eval.Plan, eval.Stats) {
		e := eval.New(rs, append([]eval.Option{eval.WithSeed(1), eval.WithMaxAggregateReads(1 << 20)}, opts...)...)
		return e.Full(world()), e.Stats()
	}
	one, oneStats := run(eval.WithWholeAggregates(-1))
	whole, wholeStats := run(eval.WithWholeAggregates(0))
	auto, autoStats := run() // once the groups on their own visited as many facts as there are placements
	if len(one.Firings) != 120 || len(one.Problems) > 0 {
		t.Fatalf("%d firings, problems %v, rejections %v; want 120 placements", len(one.Firings), one.Problems, one.Rejections)
	}
	for _, p := range []eval.Plan{whole, auto} {
		if !reflect.DeepEqual(ruletest.ReadsSorted(p.Firings), ruletest.ReadsSorted(one.Firings)) {
			t.Fatalf("computed whole, the plan differs:\n%v\none group at a time:\n%v", p.Firings, one.Firings)
		}
	}
	// Spread: 12 instances of a service on 60 nodes, none shares a node.
	seen := map[string]bool{}
	for _, f := range whole.Firings {
		svc := f.Bindings["svc"]
		pair := svc + "@" + string(f.Writes[0].Value)
		if seen[pair] {
			t.Errorf("two instances of %s on %s", svc, f.Writes[0].Value)
		}
		seen[pair] = true
	}
	if wholeStats.WholeAggregates == 0 {
		t.Fatal("siblings was never computed whole")
	}
	t.Logf("one at a time: %d groups computed, %d facts visited; whole at once: %d groups, %d facts; by default: %d groups, %d facts, %d whole",
		oneStats.Aggregates, oneStats.FactsVisited, wholeStats.Aggregates, wholeStats.FactsVisited,
		autoStats.Aggregates, autoStats.FactsVisited, autoStats.WholeAggregates)
	if autoStats.WholeAggregates == 0 || autoStats.FactsVisited >= oneStats.FactsVisited {
		t.Errorf("by default: %d computed whole, %d facts visited against %d: want it whole, and fewer", autoStats.WholeAggregates, autoStats.FactsVisited, oneStats.FactsVisited)
	}
	if wholeStats.Aggregates*5 > oneStats.Aggregates {
		t.Errorf("whole: %d groups computed one at a time, against %d without: want a fifth at most", wholeStats.Aggregates, oneStats.Aggregates)
	}
	if wholeStats.FactsVisited*3 > oneStats.FactsVisited*2 {
		t.Errorf("whole: %d facts visited, against %d without: want two thirds at most", wholeStats.FactsVisited, oneStats.FactsVisited)
	}
}
