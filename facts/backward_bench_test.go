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

// BenchmarkBackward reads the newest 30 and then all of 20,000 and of
// 100,000 records of about 1 KB under event/, as `ccattler describe`,
// events and the console's pages do (audit.Newest), in pages of 1,000:
// Store.Backward, and as baselines in the same run Backward's two earlier
// forms: every page's keys asked for descending (etcd reads and sorts
// every key left for each page), and, of 20,000 only, every page one
// range in descending order with its values (etcd reads every value left
// for each page).
//
//	go test ./facts -run '^$' -bench BenchmarkBackward -benchtime 3x
func BenchmarkBackward(b *testing.B) {
	s := etcdtest.Start(b).Store(b)
	ctx := context.Background()
	written := 0
	for _, records := range []int{20000, 100000} {
		writeRecordsFrom(b, s, written, records-written)
		written = records
		for _, n := range []int{30, records} {
			b.Run(fmt.Sprintf("records=%d/newest=%d", records, n), func(b *testing.B) {
				var store, pages, values time.Duration
				for range b.N {
					t0 := time.Now()
					seen := 0
					if _, err := s.Backward(ctx, "event/", 0, 1000, func(facts.Fact) bool { seen++; return seen < n }); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					paged := descendingKeyPages(b, s, n)
					t2 := time.Now()
					old := n
					if records <= 20000 {
						old = descendingWithValues(b, s, n)
					}
					store, pages, values = store+t1.Sub(t0), pages+t2.Sub(t1), values+time.Since(t2)
					if seen != n || paged != n || old != n {
						b.Fatalf("read %d records (baselines %d, %d), want %d", seen, paged, old, n)
					}
				}
				b.ReportMetric(float64(store.Milliseconds())/float64(b.N), "ms/read")
				b.ReportMetric(float64(pages.Milliseconds())/float64(b.N), "key-pages-ms/read")
				b.ReportMetric(pages.Seconds()/store.Seconds(), "x-faster-than-key-pages")
				if records <= 20000 {
					b.ReportMetric(float64(values.Milliseconds())/float64(b.N), "value-pages-ms/read")
				}
			})
		}
	}
}

// descendingKeyPages is Store.Backward as it was: every page's keys asked
// for descending, keys only, then its values ascending.
func descendingKeyPages(b *testing.B, s *facts.Store, n int) int {
	ctx := context.Background()
	abs := s.Abs("event/")
	end := clientv3.GetPrefixRangeEnd(abs)
	seen := 0
	var rev int64
	at := func(opts ...clientv3.OpOption) []clientv3.OpOption {
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		return opts
	}
	for {
		keys, err := s.Client.Get(ctx, abs, at(clientv3.WithRange(end), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1000))...)
		if err != nil {
			b.Fatal(err)
		}
		rev = keys.Header.Revision
		if len(keys.Kvs) == 0 {
			return seen
		}
		oldest := string(keys.Kvs[len(keys.Kvs)-1].Key)
		resp, err := s.Client.Get(ctx, oldest, at(clientv3.WithRange(end))...)
		if err != nil {
			b.Fatal(err)
		}
		for range resp.Kvs {
			if seen++; seen == n {
				return seen
			}
		}
		if !keys.More {
			return seen
		}
		end = oldest
	}
}

// descendingWithValues is Store.Backward as it was first: every page one range
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

// writeRecords writes n records of about 1 KB under event/, 1,000 to a
// transaction, and returns the revisions of the transactions.
func writeRecords(b *testing.B, s *facts.Store, n int) []int64 { return writeRecordsFrom(b, s, 0, n) }

// writeRecordsFrom is writeRecords for the records numbered first on.
func writeRecordsFrom(b *testing.B, s *facts.Store, first, n int) []int64 {
	var revs []int64
	for from := first; from < first+n; from += 1000 {
		ops := make([]facts.Op, 0, 1000)
		for i := from; i < min(from+1000, first+n); i++ {
			ops = append(ops, facts.Put(fmt.Sprintf("event/20261206T100000.%09dZ-%d", i, i), []byte(`{"rule":"schedule","pad":"`+strings.Repeat("x", 1000)+`"}`)))
		}
		rev, err := s.Commit(context.Background(), facts.Txn{Ops: ops, Checked: true})
		if err != nil {
			b.Fatal(err)
		}
		revs = append(revs, rev)
	}
	return revs
}

// BenchmarkModifiedAt reads the records written at one revision, as
// ccattler why does for every fact it explains, among 20,000 records of
// about 1 KB: 1,000 of them (one engine transaction) and one. The baseline,
// in the same run, is the range filtered by revision in etcd, which reads
// every record first.
//
//	go test ./facts -run '^$' -bench BenchmarkModifiedAt -benchtime 3x
func BenchmarkModifiedAt(b *testing.B) {
	s := etcdtest.Start(b).Store(b)
	ctx := context.Background()
	revs := writeRecords(b, s, 20000)
	one, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put("event/20261206T100000.000010500Z-x", []byte(`{"rule":"apply"}`))}, Checked: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rev  int64
		want int
	}{{"records=1000", revs[len(revs)/2], 1000}, {"records=1", one, 1}} {
		b.Run(c.name, func(b *testing.B) {
			var store, baseline time.Duration
			for range b.N {
				t0 := time.Now()
				got, err := s.ModifiedAt(ctx, "event/", c.rev)
				t1 := time.Now()
				old, err2 := s.Client.Get(ctx, s.Abs("event/"), clientv3.WithPrefix(), clientv3.WithMinModRev(c.rev), clientv3.WithMaxModRev(c.rev))
				store, baseline = store+t1.Sub(t0), baseline+time.Since(t1)
				if err != nil || err2 != nil || len(got) != c.want || len(old.Kvs) != c.want {
					b.Fatalf("read %d records (baseline %d), want %d: %v %v", len(got), len(old.Kvs), c.want, err, err2)
				}
			}
			b.ReportMetric(float64(store.Microseconds())/1000/float64(b.N), "ms/read")
			b.ReportMetric(float64(baseline.Microseconds())/1000/float64(b.N), "baseline-ms/read")
			b.ReportMetric(baseline.Seconds()/store.Seconds(), "x-faster")
		})
	}
}
