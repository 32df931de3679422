package eval_test

import (
	"fmt"
	"reflect"
	"slices"
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

// TestWholeAggregateAdjustedWhileCheaper: a whole aggregate kept in the
// store is adjusted for a batch of changes of its fact types while that
// costs less than computing it again, which is weighed by the facts its
// computation visited; past that the batch drops it and the next round
// computes it whole again. Either way a round places as an evaluator
// that starts afresh does. (Weighed by the size of its smallest fact
// type instead, the scheduler's counts were dropped and computed twice
// again in most rounds of a large apply.)
func TestWholeAggregateAdjustedWhileCheaper(t *testing.T) {
	rs := loadSrc(t, spread)
	tb := newTable()
	for i := 1; i <= 60; i++ {
		putKnown(tb, facts.NodeState(fmt.Sprintf("node-%02d", i)), `"alive"`)
	}
	for i := range 600 {
		id := fmt.Sprintf("%05x", 0x10000+i)
		putKnown(tb, facts.InstanceService(id), fmt.Sprintf(`"old-%d"`, i%20))
		putKnown(tb, facts.InstanceState(id), `"running"`)
		putKnown(tb, facts.Placement(id), fmt.Sprintf(`"node-%02d"`, i%60+1))
	}
	next := 0
	pending := func(n int) (changes []facts.Change) {
		for range n {
			id := fmt.Sprintf("%05x", next)
			next++
			changes = append(changes,
				putKnown(tb, facts.InstanceService(id), fmt.Sprintf(`"svc-%d"`, next%10)),
				putKnown(tb, facts.InstanceState(id), `"pending"`))
		}
		return changes
	}
	pending(120)
	// Every batch goes by wholeWorthAdjusting: none is adjusted group by group.
	ev := eval.New(rs, eval.WithSeed(1), eval.WithWholeAggregates(0), eval.WithMaxAdjust(0))
	from := tb.Rev()
	p := ev.Full(tb)
	if len(p.Firings) != 120 || ev.Stats().WholeAggregates == 0 {
		t.Fatalf("first round: %d firings, %d computed whole; want 120 placements, siblings whole", len(p.Firings), ev.Stats().WholeAggregates)
	}
	// round evaluates a batch and returns its plan's writes, put in the
	// table: the next batch holds them.
	round := func(name string, changes []facts.Change, wantComputed bool) []facts.Change {
		t.Helper()
		rev := tb.Rev()
		was := ev.Stats()
		p := ev.Continue(from, tb, changes, false)
		from = rev
		computed := ev.Stats().WholeAggregates - was.WholeAggregates
		if wantComputed != (computed > 0) {
			t.Errorf("%s: computed whole %d times; want it computed again: %v", name, computed, wantComputed)
		}
		fresh := eval.New(rs, eval.WithSeed(1), eval.WithWholeAggregates(0)).Full(tb)
		if got, want := planWrites(p), planWrites(fresh); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: placed %v; an evaluator starting afresh places %v", name, got, want)
		}
		return applyKnown(tb, p)
	}
	// The placements come back with 20 more pending: 160 changes of its
	// types, against the 1,800 facts computing it visited.
	placed := round("small batch", append(applyKnown(tb, p), pending(20)...), false)
	// 14,000 instances that are neither pending nor placed arrive: fewer
	// changes of its types than eight times what computing it visits.
	idle := func(n int) (changes []facts.Change) {
		for range n {
			id := fmt.Sprintf("%05x", next)
			next++
			changes = append(changes, putKnown(tb, facts.InstanceService(id), `"idle"`))
		}
		return changes
	}
	placed = round("large batch, still cheaper", slices.Concat(placed, idle(14000), pending(20)), false)
	// 16,000 more: now more.
	round("larger batch", slices.Concat(placed, idle(16000), pending(20)), true)
}

// planWrites lists a plan's writes as key=value, sorted.
func planWrites(p eval.Plan) []string {
	var out []string
	for _, f := range p.Firings {
		for _, w := range f.Writes {
			out = append(out, w.Key+"="+string(w.Value))
		}
	}
	slices.Sort(out)
	return out
}
