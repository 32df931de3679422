package eval_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// world builds a converged cluster of about n facts under the lifecycle
// controllers: 100 nodes, services of 10 instances, each instance with its
// service, state, node, ip, health, placement and endpoint (7 facts).
func world(b *testing.B, n int) (*table, []string) {
	b.Helper()
	tb := newTable()
	for i := 0; i < 100; i++ {
		node := fmt.Sprintf("node-%d", i)
		tb.put(facts.NodeState(node), `"alive"`)
		tb.put(facts.NodeCapacityCPU(node), `1000000`)
		tb.put(facts.Lease(node), `{}`)
	}
	var ids []string
	inst := 0
	for s := 0; tb.Len() < n; s++ {
		svc := fmt.Sprintf("svc-%d", s)
		tb.put(facts.DesiredService(svc), `{}`)
		tb.put(facts.ServiceExpose(svc, 8080), `{}`)
		tb.put(facts.Intent("user", svc), `10`)
		tb.put(facts.EffectiveInstances(svc), `10`)
		for i := 0; i < 10; i++ {
			id := fmt.Sprintf("%05x", inst)
			node := fmt.Sprintf("node-%d", inst%100)
			inst++
			ip := fmt.Sprintf("10.%d.%d.%d", inst>>16&255, inst>>8&255, inst&255)
			tb.put(facts.InstanceService(id), `"`+svc+`"`)
			tb.put(facts.InstanceState(id), `"running"`)
			tb.put(facts.InstanceNode(id), `"`+node+`"`)
			tb.put(facts.InstanceIP(id), `"`+ip+`"`)
			tb.put(facts.InstanceHealth(id), `"healthy"`)
			tb.put(facts.Placement(id), `"`+node+`"`)
			tb.put(facts.Endpoint(svc, id), `{"ip": "`+ip+`", "port": 8080}`)
			ids = append(ids, id)
		}
	}
	return tb, ids
}

// BenchmarkIncrementalOneChange: one instance's health flips; the time to
// evaluate the affected bindings and produce the plan must not grow with
// the number of facts.
func BenchmarkIncrementalOneChange(b *testing.B) {
	rs, diags := rules.Load("../testdata/lifecycle")
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) {
			start := time.Now()
			tb, ids := world(b, n)
			b.Logf("%d facts built in %v", tb.Len(), time.Since(start).Round(time.Millisecond))
			ev := eval.New(rs)
			// Warm up: the world is converged, a no-op change plans nothing.
			if p := ev.Incremental(tb, []facts.Change{tb.put(facts.InstanceHealth(ids[0]), `"healthy"`)}); len(p.Firings) != 0 {
				b.Fatalf("world not converged: %+v %v", p.Firings, p.Problems)
			}
			states := []string{`"unhealthy"`, `"healthy"`}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := ids[(i*7919)%len(ids)]
				ch := tb.put(facts.InstanceHealth(id), states[(i/len(ids))%2])
				p := ev.Incremental(tb, []facts.Change{ch})
				if len(p.Problems) > 0 {
					b.Fatal(p.Problems)
				}
				b.StopTimer()
				tb.apply(p)
				b.StartTimer()
			}
			st := ev.Stats()
			b.ReportMetric(float64(st.FactsVisited)/float64(b.N+1), "facts-visited/op")
		})
	}
}

// BenchmarkFull: startup or reload over a converged world (nothing to write).
func BenchmarkFull(b *testing.B) {
	rs, diags := rules.Load("../testdata/lifecycle")
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) {
			tb, _ := world(b, n)
			ev := eval.New(rs)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if p := ev.Full(tb); len(p.Firings) != 0 || len(p.Problems) != 0 {
					b.Fatalf("world not converged: %d firings, %v", len(p.Firings), p.Problems)
				}
			}
			b.ReportMetric(float64(tb.Len())*float64(b.N)/b.Elapsed().Seconds(), "facts/s")
		})
	}
}

// BenchmarkScheduleRound: one round places every pending instance on 10
// nodes; each placement changes the usage the next one sees.
func BenchmarkScheduleRound(b *testing.B) {
	rs, diags := rules.Load("testdata/choice")
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	for _, n := range []int{250, 1000, 4000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			tb := newTable()
			for i := 0; i < 10; i++ {
				node := fmt.Sprintf("node-%d", i)
				tb.put(facts.NodeState(node), `"alive"`)
				tb.put(facts.NodeCapacityCPU(node), `100000`)
			}
			tb.put(facts.ServiceCPU("web"), `1`)
			for i := 0; i < n; i++ {
				id := fmt.Sprintf("%05x", i)
				tb.put(facts.InstanceService(id), `"web"`)
				tb.put(facts.InstanceState(id), `"pending"`)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if p := eval.New(rs).Full(tb); len(p.Firings) != n {
					b.Fatalf("%d placements, want %d (%v)", len(p.Firings), n, p.Problems)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "placements/s")
		})
	}
}
