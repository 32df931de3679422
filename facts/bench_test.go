package facts_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// instanceFacts returns the facts a running instance has, as the seed's
// lifecycle example leaves them: 7 facts per instance.
func instanceFacts(i int) []facts.Fact {
	id := fmt.Sprintf("%05x", i)
	node := fmt.Sprintf("node-%d", i%1000)
	rev := int64(i + 1)
	mk := func(k, v string) facts.Fact {
		return facts.Fact{Key: k, Value: []byte(v), ModRevision: rev, CreateRevision: rev}
	}
	return []facts.Fact{
		mk(facts.InstanceService(id), `"web"`),
		mk(facts.InstanceState(id), `"running"`),
		mk(facts.InstanceNode(id), `"`+node+`"`),
		mk(facts.InstanceIP(id), `"10.1.0.5"`),
		mk(facts.InstanceHealth(id), `"healthy"`),
		mk(facts.Placement(id), `"`+node+`"`),
		mk(facts.Endpoint("web", id), `{"ip": "10.1.0.5", "port": 8080}`),
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkTableMemory reports the table's memory per fact beyond the bytes
// of the key and value themselves (target < 300), alone in the process; at
// 200,000 instances too (1.4 million facts, more than the 1.26 million of
// `ccattler bench --size large`'s mirror, whose own estimate shares the
// heap with etcd, the engine and 5,000 simulated nodes).
func BenchmarkTableMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 200_000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				var all []facts.Fact
				var payload uint64
				for j := 0; j < n; j++ {
					for _, f := range instanceFacts(j) {
						payload += uint64(len(f.Key) + len(f.Value))
						all = append(all, f)
					}
				}
				before := heapInUse()
				t := facts.NewTable(nil)
				for _, f := range all {
					t.Put(f)
				}
				after := heapInUse()
				runtime.KeepAlive(all)
				// The key and value bytes already live in all; what the table adds is overhead.
				b.ReportMetric(float64(after-before)/float64(len(all)), "overhead-bytes/fact")
				b.ReportMetric(float64(payload)/float64(len(all)), "payload-bytes/fact")
				runtime.KeepAlive(t)
			}
		})
	}
}

// BenchmarkMirrorLoad reports the initial load rate of a mirror from a real
// embedded etcd holding 70,000 facts.
func BenchmarkMirrorLoad(b *testing.B) {
	e := etcdtest.Start(b)
	s := e.Store(b)
	const instances = 10_000
	var ops []facts.Op
	for j := 0; j < instances; j++ {
		for _, f := range instanceFacts(j) {
			ops = append(ops, facts.Put(f.Key, f.Value))
		}
		if len(ops) >= 7000 {
			if _, err := s.Commit(context.Background(), facts.Txn{Ops: ops}); err != nil {
				b.Fatal(err)
			}
			ops = nil
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := facts.NewMirror(s, nil)
		if err := m.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		if _, n := m.Stats(); n != instances*7 {
			b.Fatalf("mirror has %d facts", n)
		}
	}
	b.ReportMetric(float64(instances*7*b.N)/b.Elapsed().Seconds(), "facts/s")
}
