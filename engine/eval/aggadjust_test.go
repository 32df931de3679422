package eval_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// randomWorld is a cluster in some random state: nodes alive or not, with
// or without leases, services with intents, instances pending or running,
// some placed.
func randomWorld(seed uint64) *table {
	r := rand.New(rand.NewPCG(seed, 7))
	tb := newTable()
	nodes := 2 + r.IntN(6)
	for i := 0; i < nodes; i++ {
		n := fmt.Sprintf("node-%d", i)
		tb.put(facts.NodeState(n), []string{`"alive"`, `"alive"`, `"unreachable"`}[r.IntN(3)])
		tb.put(facts.NodeCapacityCPU(n), fmt.Sprint(1+r.IntN(8)))
		if r.IntN(4) > 0 {
			tb.put(facts.Lease(n), `{}`)
		}
	}
	id := 0
	for s := 0; s < 1+r.IntN(4); s++ {
		svc := fmt.Sprintf("svc-%d", s)
		tb.put(facts.DesiredService(svc), `{}`)
		tb.put(facts.ServiceCPU(svc), []string{`0.5`, `1`, `2`}[r.IntN(3)])
		tb.put(facts.Intent("user", svc), fmt.Sprint(r.IntN(12)))
		for i := 0; i < r.IntN(10); i++ {
			iid := fmt.Sprintf("%05x", id)
			id++
			tb.put(facts.InstanceService(iid), `"`+svc+`"`)
			tb.put(facts.InstanceState(iid), []string{`"pending"`, `"running"`, `"failed"`}[r.IntN(3)])
			if r.IntN(2) == 0 {
				tb.put(facts.Placement(iid), fmt.Sprintf(`"node-%d"`, r.IntN(nodes)))
			}
		}
	}
	return tb
}

// TestAggregateCacheChangesNothing: on random worlds, with the same seed,
// the plans with and without the round's aggregate cache are identical.
func TestAggregateCacheChangesNothing(t *testing.T) {
	rs, diags := rules.Load("../testdata/lifecycle")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	hits := int64(0)
	for seed := uint64(0); seed < 60; seed++ {
		// Every member listed: which few the bound keeps depends on how
		// a result was reached, cached or not.
		with := eval.New(rs, eval.WithSeed(seed), eval.WithMaxAggregateReads(1<<20))
		without := eval.New(rs, eval.WithSeed(seed), eval.WithoutAggregateCache(), eval.WithMaxAggregateReads(1<<20))
		tw, to := randomWorld(seed), randomWorld(seed)
		for step := 0; step < 4; step++ {
			var pw, po eval.Plan
			if step == 0 {
				pw, po = with.Full(tw), without.Full(to)
			} else {
				// an outside change: a node's lease goes, or one comes back
				n := fmt.Sprintf("node-%d", step)
				var cw, co facts.Change
				if _, ok := tw.Get(facts.Lease(n)); ok {
					tw.rev++
					f, _ := tw.Delete(facts.Lease(n))
					to.rev++
					to.Delete(facts.Lease(n))
					cw = facts.Change{Fact: f, Deleted: true}
					co = cw
				} else {
					cw, co = tw.put(facts.Lease(n), `{}`), to.put(facts.Lease(n), `{}`)
				}
				pw, po = with.Incremental(tw, []facts.Change{cw}), without.Incremental(to, []facts.Change{co})
			}
			if !reflect.DeepEqual(ruletest.ReadsSorted(pw.Firings), ruletest.ReadsSorted(po.Firings)) || !reflect.DeepEqual(pw.Rejections, po.Rejections) {
				t.Fatalf("seed %d step %d: plans differ\nwith cache:    %+v\nwithout cache: %+v", seed, step, pw.Firings, po.Firings)
			}
			tw.apply(pw)
			to.apply(po)
		}
		hits += with.Stats().AggregateHits
	}
	if hits == 0 {
		t.Error("the cache was never used")
	}
}
