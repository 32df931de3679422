package facts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// BenchmarkHistory measures what etcd keeps of a steady stream of
// rewrites (an agent's health reports, 10,000 instances, rewritten 60 and
// 120 times), with and without a compaction after each round to the round
// before, as the engine leader's compactor does: the live heap (etcd runs
// in this process; its key index holds every version not compacted) and the
// size of etcd's backend file.
//
//	go test ./facts -run '^$' -bench BenchmarkHistory -benchtime 1x
func BenchmarkHistory(b *testing.B) {
	for _, rounds := range []int{60, 120} {
		for _, compact := range []bool{false, true} {
			b.Run(fmt.Sprintf("rounds=%d/compact=%v", rounds, compact), func(b *testing.B) {
				for range b.N {
					heap, db := history(b, 10000, rounds, compact)
					b.ReportMetric(float64(heap)/1e6, "heap-MB")
					b.ReportMetric(float64(db)/1e6, "db-MB")
				}
			})
		}
	}
}

// history rewrites keys facts rounds times on a fresh etcd and returns
// the heap it grew by and the size of its backend file.
func history(b *testing.B, keys, rounds int, compact bool) (heap uint64, db int64) {
	e := etcdtest.Start(b)
	s := e.Store(b)
	ctx := context.Background()
	base := heapInUse()
	var prev int64
	for r := range rounds {
		var rev int64
		for from := 0; from < keys; from += 1000 {
			ops := make([]facts.Op, 0, 1000)
			for i := from; i < from+1000; i++ {
				ops = append(ops, facts.Put(facts.InstanceHealth(fmt.Sprintf("%05x", i)), fmt.Appendf(nil, `"healthy"%*s`, 100+r%7, "")))
			}
			var err error
			if rev, err = s.Commit(ctx, facts.Txn{Ops: ops, Checked: true}); err != nil {
				b.Fatal(err)
			}
		}
		// The server's compactions are an interval apart, time enough
		// for etcd to free what each one discards: waiting for it here
		// (physical) measures that steady state, not a backlog.
		if compact && prev > 0 {
			if err := etcdtest.Compact(ctx, s, prev); err != nil {
				b.Fatal(err)
			}
		}
		prev = rev
	}
	// Raft keeps recent entries in memory until a snapshot: small writes
	// push the large ones out, so that the heap is the history's.
	for range 250 {
		if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put("observed/clock", []byte(`"2026-12-02T00:00:00Z"`))}, Checked: true}); err != nil {
			b.Fatal(err)
		}
	}
	heap = heapInUse() - base
	st, err := os.Stat(filepath.Join(e.Cfg.DataDir, "member", "snap", "db"))
	if err != nil {
		b.Fatal(err)
	}
	return heap, st.Size()
}
