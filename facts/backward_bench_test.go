package facts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkBackward reads the newest 30 and then all of 20,000 records of
// about 1 KB under event/, as `ccattler describe` and the console's pages
// do (audit.Newest), in pages of 1,000: Store.Backward, and as the baseline
// in the same run, pages read in descending order with their values, for
// which etcd reads the whole remaining range before it applies the limit.
//
//	go test ./facts -run '^$' -bench BenchmarkBackward -benchtime 3x
func BenchmarkBackward(b *testing.B) {
	s := etcdtest.Start(b).Store(b)
	ctx := context.Background()
	const records = 20000
	for from := 0; from < records; from += 1000 {
		ops := make([]facts.Op, 0, 1000)
		for i := from; i < from+1000; i++ {
			ops = append(ops, facts.Put(fmt.Sprintf("event/20261206T100000.%09dZ-%d", i, i), []byte(`{"rule":"schedule","pad":"`+strings.Repeat("x", 1000)+`"}`)))
		}
		if _, err := s.Commit(ctx, facts.Txn{Ops: ops, Checked: true}); err != nil {
			b.Fatal(err)
		}
	}
	backward := func(n int) int {
		seen := 0
		if _, err := s.Backward(ctx, "event/", 0, 1000, func(facts.Fact) bool { seen++; return seen < n }); err != nil {
			b.Fatal(err)
		}
		return seen
	}
	for _, n := range []int{30, records} {
		b.Run(fmt.Sprintf("newest=%d", n), func(b *testing.B) {
			var store, baseline time.Duration
			for range b.N {
				t0 := time.Now()
				got := backward(n)
				t1 := time.Now()
				old := descendingWithValues(b, s, n)
				store, baseline = store+t1.Sub(t0), baseline+time.Since(t1)
				if got != n || old != n {
					b.Fatalf("read %d records (baseline %d), want %d", got, old, n)
				}
			}
			b.ReportMetric(float64(store.Milliseconds())/float64(b.N), "ms/read")
			b.ReportMetric(float64(baseline.Milliseconds())/float64(b.N), "baseline-ms/read")
			b.ReportMetric(baseline.Seconds()/store.Seconds(), "x-faster")
		})
	}
}

// descendingWithValues is Store.Backward as it was: every page one range
// in descending order, values included.
func descendingWithValues(b *testing.B, s *facts.Store, n int) int {
	ctx := context.Background()
	abs := s.Abs("event/")
	end := clientv3.GetPrefixRangeEnd(abs)
	seen := 0
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1000)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.Client.Get(ctx, abs, opts...)
		if err != nil {
			b.Fatal(err)
		}
		rev = resp.Header.Revision
		for range resp.Kvs {
			if seen++; seen == n {
				return seen
			}
		}
		if !resp.More {
			return seen
		}
		end = string(resp.Kvs[len(resp.Kvs)-1].Key)
	}
}
