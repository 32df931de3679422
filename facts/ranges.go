package facts

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// First returns the first fact under prefix in key order, without its
// value, and the revision it read at; ok is false when there is none.
func (s *Store) First(ctx context.Context, prefix string) (f Fact, ok bool, rev int64, err error) {
	return s.edge(ctx, prefix, clientv3.SortAscend)
}

// Last is First for the last fact in key order.
func (s *Store) Last(ctx context.Context, prefix string) (f Fact, ok bool, rev int64, err error) {
	return s.edge(ctx, prefix, clientv3.SortDescend)
}

func (s *Store) edge(ctx context.Context, prefix string, order clientv3.SortOrder) (Fact, bool, int64, error) {
	resp, err := s.Client.Get(ctx, s.Abs(prefix), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, order), clientv3.WithLimit(1))
	if err != nil {
		return Fact{}, false, 0, fmt.Errorf("list %s: %w", s.Abs(prefix), err)
	}
	if len(resp.Kvs) == 0 {
		return Fact{}, false, resp.Header.Revision, nil
	}
	return s.factOf(resp.Kvs[0]), true, resp.Header.Revision, nil // keys only: no value
}

// Backward visits the facts under prefix in descending key order until fn
// returns false or they run out. It reads page keys at a time, every page
// at revision rev (0: the revision of the first page), so the visit is one
// consistent view and a reader of the last few never loads them all; it
// returns the revision it read at.
//
// etcd applies a limit to a range sorted other than ascending only after
// reading the whole range: a page read in descending order reads every
// older key too (and with its values, every older value: paging through
// 100,000 firing records read 50 times that many values). So the newest
// page is two ranges: its keys, descending and keys only (etcd answers
// those from its in-memory index, reading no value), then the page's
// values, in ascending order between the oldest of those keys and the
// end. A reader that goes past it gets the keys left in one keys-only
// range, ascending and without a limit, and then each page's values as
// the span between two of those keys: asking for the keys page by page,
// descending, read and sorted every key left for each page, n²/(2·page)
// keys for n.
func (s *Store) Backward(ctx context.Context, prefix string, rev int64, page int, fn func(Fact) bool) (int64, error) {
	abs := s.Abs(prefix)
	end := clientv3.GetPrefixRangeEnd(abs)
	at := func(opts ...clientv3.OpOption) []clientv3.OpOption { // at rev, once the first page set it
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		return opts
	}
	keys, err := s.Client.Get(ctx, abs, at(clientv3.WithRange(end), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(page)))...)
	if err != nil {
		return rev, fmt.Errorf("list %s: %w", abs, err)
	}
	if rev == 0 {
		rev = keys.Header.Revision
	}
	if len(keys.Kvs) == 0 {
		return rev, nil
	}
	// visit gives fn the facts of [from, to) at rev, the last first; false
	// when fn said stop.
	visit := func(from, to string) (bool, error) {
		resp, err := s.Client.Get(ctx, from, clientv3.WithRange(to), clientv3.WithRev(rev))
		if err != nil {
			return false, fmt.Errorf("list %s: %w", abs, err)
		}
		for i := len(resp.Kvs) - 1; i >= 0; i-- {
			if !fn(s.factOf(resp.Kvs[i])) {
				return false, nil
			}
		}
		return true, nil
	}
	oldest := string(keys.Kvs[len(keys.Kvs)-1].Key)
	if more, err := visit(oldest, end); err != nil || !more || !keys.More {
		return rev, err
	}
	rest, err := s.Client.Get(ctx, abs, clientv3.WithRange(oldest), clientv3.WithKeysOnly(), clientv3.WithRev(rev))
	if err != nil {
		return rev, fmt.Errorf("list %s: %w", abs, err)
	}
	for j := len(rest.Kvs); j > 0; j -= page {
		from := string(rest.Kvs[max(j-page, 0)].Key)
		if more, err := visit(from, oldest); err != nil || !more {
			return rev, err
		}
		oldest = from // the next page ends before the oldest read
	}
	return rev, nil
}

// ModifiedAt returns the facts under prefix whose latest change was made
// at revision rev, in key order.
//
// etcd filters a range by revision only after reading all of it, values
// included: the records of one revision, asked of 100,000, read them all,
// and ccattler why asks once per fact it explains. So the keys are asked
// for alone (etcd answers a keys-only range from its in-memory index), and
// then the values of the span they cover, at the revision of the first
// read. The facts written at one revision are one transaction's, most of
// them side by side in key order (a record's id begins with its time).
func (s *Store) ModifiedAt(ctx context.Context, prefix string, rev int64) ([]Fact, error) {
	abs := s.Abs(prefix)
	keys, err := s.Client.Get(ctx, abs, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMinModRev(rev), clientv3.WithMaxModRev(rev))
	if err != nil {
		return nil, fmt.Errorf("list %s at revision %d: %w", abs, rev, err)
	}
	if len(keys.Kvs) == 0 {
		return nil, nil
	}
	lo, hi := string(keys.Kvs[0].Key), string(keys.Kvs[len(keys.Kvs)-1].Key)
	resp, err := s.Client.Get(ctx, lo, clientv3.WithRange(hi+"\x00"), clientv3.WithRev(keys.Header.Revision))
	if err != nil {
		return nil, fmt.Errorf("list %s at revision %d: %w", abs, rev, err)
	}
	out := make([]Fact, 0, len(keys.Kvs))
	for _, kv := range resp.Kvs {
		if kv.ModRevision == rev {
			out = append(out, s.factOf(kv))
		}
	}
	return out, nil
}

// GetAt returns one fact as it was at revision rev; ok is false if the key
// did not exist then. A compacted rev is an error.
func (s *Store) GetAt(ctx context.Context, key string, rev int64) (Fact, bool, error) {
	resp, err := s.Client.Get(ctx, s.Abs(key), clientv3.WithRev(rev))
	if err != nil {
		return Fact{}, false, fmt.Errorf("get %s at revision %d: %w", key, rev, err)
	}
	if len(resp.Kvs) == 0 {
		return Fact{}, false, nil
	}
	return s.factOf(resp.Kvs[0]), true, nil
}

// GetMany returns the facts at keys, all read at one revision in one
// request: out[i] is the fact at keys[i], the zero Fact if it does not exist.
func (s *Store) GetMany(ctx context.Context, keys []string) ([]Fact, error) {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(s.Abs(k))
	}
	resp, err := s.Client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("get %d keys: %w", len(keys), err)
	}
	out := make([]Fact, len(keys))
	for i := range keys {
		if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
			out[i] = s.factOf(kvs[0])
		}
	}
	return out, nil
}

// WithRoot returns a store on the same connection under another root, for
// keys outside the fact root such as a server's control keys. They are no
// facts: commit them with Txn.Checked set, since the schema knows none.
// Closing either store closes the connection of both.
func (s *Store) WithRoot(root string) *Store { return NewStore(s.Client, root, s.Schema) }

// Remove deletes one key and reports whether it existed.
func (s *Store) Remove(ctx context.Context, key string) (bool, error) {
	resp, err := s.Client.Delete(ctx, s.Abs(key))
	if err != nil {
		return false, fmt.Errorf("delete %s: %w", key, err)
	}
	return resp.Deleted > 0, nil
}

// Endpoints are the etcd endpoints the store's connection uses.
func (s *Store) Endpoints() []string { return s.Client.Endpoints() }
