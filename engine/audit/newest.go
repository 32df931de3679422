package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// newestPage is how many records Newest reads from etcd at a time.
const newestPage = 1000

// Query bounds a backward read of the records.
type Query struct {
	Since time.Time // stop at the first record older than this (zero: none)
	// Raw, when set, is a cheap first test of a record's stored bytes
	// (such as the text of a key it must name): a record it rejects is
	// not decoded, and not passed on.
	Raw func([]byte) bool
	// Limit is the most records read (0: no limit).
	Limit int
}

// Newest visits the records newest first until fn returns false, the
// records run out, one older than q.Since is reached or q.Limit records are
// read. Record ids begin with their time, so it reads backwards in pages
// of keys, every page at the revision of the first: one consistent view,
// and a reader of the latest few never loads the whole log. It returns the
// revision read at and how many records it read; a record that does not
// parse is skipped and counted in bad.
func Newest(ctx context.Context, s *facts.Store, q Query, fn func(Event) bool) (rev int64, read, bad int, err error) {
	prefix := s.Abs("event/")
	end := clientv3.GetPrefixRangeEnd(prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(newestPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.Client.Get(ctx, prefix, opts...)
		if err != nil {
			return rev, read, bad, fmt.Errorf("read records: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if q.Limit > 0 && read >= q.Limit {
				return rev, read, bad, nil
			}
			key := s.Rel(string(kv.Key))
			if !q.Since.IsZero() {
				if t, ok := facts.EventTime(strings.TrimPrefix(key, "event/")); ok && t.Before(q.Since) {
					return rev, read, bad, nil
				}
			}
			read++
			if q.Raw != nil && !q.Raw(kv.Value) {
				continue
			}
			e, err := Decode(facts.Fact{Key: key, Value: kv.Value, ModRevision: kv.ModRevision})
			if err != nil {
				bad++
				continue
			}
			if !fn(e) {
				return rev, read, bad, nil
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, read, bad, nil
		}
		end = string(resp.Kvs[len(resp.Kvs)-1].Key) // the next page ends before the oldest read
	}
}
