package facts

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// WatchResponse is one answer of a watch (Store.WatchChanges): the changes
// of one or more revisions, in revision order, or why the watch ends.
type WatchResponse struct {
	// Changes have keys relative to the root; a delete has Deleted set
	// and no Value. Prev is not known (PrevKnown false). A change that
	// created its key has CreateRevision == ModRevision.
	Changes []Change
	Rev     int64 // the store's revision when etcd sent the answer
	// Err, when set, is why the watch broke; the channel closes after it.
	// CompactRevision is set when the start revision was compacted: the
	// changes from there are lost, a watch from now on misses none after.
	Err             error
	CompactRevision int64
}

// WatchChanges streams the changes under prefix (relative to the root) from
// revision rev on, like Watch. The channel closes when ctx is done or the
// watch breaks (after a response with Err set); the caller cancels ctx to
// stop it. A watch needs a member that has a leader: one cut off from the
// cluster's quorum breaks it, so a caller may watch again elsewhere.
func (s *Store) WatchChanges(ctx context.Context, prefix string, rev int64) <-chan WatchResponse {
	wc := s.Watch(ctx, prefix, rev)
	out := make(chan WatchResponse)
	go func() {
		defer close(out)
		for resp := range wc {
			r := WatchResponse{Rev: resp.Header.Revision, Err: resp.Err(), CompactRevision: resp.CompactRevision}
			if len(resp.Events) > 0 {
				r.Changes = make([]Change, len(resp.Events))
			}
			for i, ev := range resp.Events {
				r.Changes[i] = Change{Fact: Fact{Key: s.Rel(string(ev.Kv.Key)), Value: ev.Kv.Value,
					ModRevision: ev.Kv.ModRevision, CreateRevision: ev.Kv.CreateRevision, Lease: ev.Kv.Lease},
					Deleted: ev.Type == mvccpb.DELETE}
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
