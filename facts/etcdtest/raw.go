package etcdtest

import (
	"context"
	"fmt"

	"github.com/ccattler/ccattler/facts"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PutRaw writes value at key (relative to the store's root) as it is,
// unchecked by the schema, as a careless or hostile writer with etcd access
// could: tests of what readers make of a bad fact write it with this. It
// returns the revision of the write; etcd's refusal (a principal without
// the grant) is the error.
func PutRaw(ctx context.Context, s *facts.Store, key, value string) (int64, error) {
	resp, err := s.Client.Put(ctx, s.Abs(key), value)
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// Compact compacts the store's history up to rev and waits until the
// compaction is applied, so that a watch or read from before rev fails
// with ErrCompacted.
func Compact(ctx context.Context, s *facts.Store, rev int64) error {
	_, err := s.Client.Compact(ctx, rev, clientv3.WithCompactPhysical())
	return err
}

// WritesBetween returns the etcd key (absolute) of every put and delete of
// the whole keyspace, under the store's root or not, at revisions after
// from up to and including to, in revision order: what a test asserts
// nothing else wrote while it acted.
func WritesBetween(ctx context.Context, s *facts.Store, from, to int64) ([]string, error) {
	if to <= from {
		return nil, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := s.Client.Watch(wctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(from+1))
	var keys []string
	for rev := from; rev < to; {
		wr, ok := <-wch
		if !ok {
			return keys, fmt.Errorf("watch of every write from revision %d: closed (%v)", from+1, ctx.Err())
		}
		if err := wr.Err(); err != nil {
			return keys, fmt.Errorf("watch of every write from revision %d: %w", from+1, err)
		}
		for _, ev := range wr.Events {
			rev = ev.Kv.ModRevision
			if rev > to {
				break
			}
			keys = append(keys, string(ev.Kv.Key))
		}
	}
	return keys, nil
}
