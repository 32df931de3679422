package facts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrCompacted is the error of a read or watch at a revision etcd no longer
// keeps: its history before the compact revision (CompactRevision) is gone.
// Test for it with errors.Is; Store's methods wrap it.
var ErrCompacted = rpctypes.ErrCompacted

// ErrCompactDenied is Compact's error when the client is not etcd's root:
// etcd lets no other user compact, whatever its roles.
var ErrCompactDenied = errors.New("facts: only etcd's root user may compact its history")

// CompactTimeout bounds one Compact. A logical compaction is one Raft
// entry; if it takes longer, etcd is in trouble and the next interval tries
// again rather than queue behind it.
const CompactTimeout = 30 * time.Second

// Compact discards etcd's history before revision rev: reads and watches
// from an older revision fail with ErrCompacted from then on, and etcd
// frees the versions that were overwritten or deleted before rev. It is
// logical (physical=false): it returns once the compaction is applied, and
// etcd deletes the old versions from its backend in the background, in
// small batches, rather than holding the caller for them. A rev at or
// below the current compact revision is ErrCompacted (wrapped), a rev past
// the current revision etcd's ErrFutureRev, and a client other than root
// ErrCompactDenied. One member's compaction is every member's: it goes
// through Raft.
func (s *Store) Compact(ctx context.Context, rev int64) error {
	return s.compact(ctx, rev, CompactTimeout)
}

// CompactAndWait is Compact that returns only once etcd has deleted the
// old versions from its backend (physical): what RecoverSpace then
// defragments is the backend without them. It waits up to DefragTimeout.
func (s *Store) CompactAndWait(ctx context.Context, rev int64) error {
	return s.compact(ctx, rev, DefragTimeout, clientv3.WithCompactPhysical())
}

func (s *Store) compact(ctx context.Context, rev int64, within time.Duration, opts ...clientv3.CompactOption) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, err := s.Client.Compact(ctx, rev, opts...)
	switch {
	case err == nil:
		return nil
	case isDenied(err):
		return fmt.Errorf("compact etcd's history before revision %d: %w: %w", rev, ErrCompactDenied, err)
	default:
		return fmt.Errorf("compact etcd's history before revision %d: %w", rev, err)
	}
}

// CompactRevision returns the oldest revision etcd still answers reads at
// (1: nothing was ever compacted); a read at an older one fails with
// ErrCompacted. etcd reports it nowhere but in that failure, so it is
// found by bisection over the revisions, one count-only read of one key
// each: about log2(revision) requests, 25 at 30 million.
func (s *Store) CompactRevision(ctx context.Context) (int64, error) {
	cur, err := s.Revision(ctx)
	if err != nil {
		return 0, err
	}
	readable := func(rev int64) (bool, error) {
		_, err := s.Client.Get(ctx, s.Root, clientv3.WithRev(rev), clientv3.WithCountOnly())
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, ErrCompacted):
			return false, nil
		default:
			return false, fmt.Errorf("read at revision %d: %w", rev, err)
		}
	}
	// Invariant: lo is compacted (or 0), hi is readable.
	lo, hi := int64(0), cur
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := readable(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}
