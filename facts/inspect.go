package facts

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Count returns how many keys lie under prefix (relative to the root)
// without reading them, and the revision it counted at.
func (s *Store) Count(ctx context.Context, prefix string) (n, rev int64, err error) {
	resp, err := s.Client.Get(ctx, s.Abs(prefix), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, 0, fmt.Errorf("count %s: %w", s.Abs(prefix), err)
	}
	return resp.Count, resp.Header.Revision, nil
}

// LeaseTTL returns how long lease id has left (negative: it has expired
// or never existed) and the TTL it was granted with.
func (s *Store) LeaseTTL(ctx context.Context, id LeaseID) (left, granted time.Duration, err error) {
	resp, err := s.Client.TimeToLive(ctx, id)
	if err != nil {
		return 0, 0, fmt.Errorf("time to live of lease %x: %w", id, err)
	}
	return time.Duration(resp.TTL) * time.Second, time.Duration(resp.GrantedTTL) * time.Second, nil
}

// Revision returns the store's current revision.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	// Any read answers with the revision; one of a single key costs least.
	resp, err := s.Client.Get(ctx, s.Root, clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read the revision: %w", err)
	}
	return resp.Header.Revision, nil
}

// RevokeAt is Revoke returning the revision of the revocation: the keys
// attached to the lease are deleted at it.
func (s *Store) RevokeAt(ctx context.Context, id LeaseID) (int64, error) {
	resp, err := s.Client.Revoke(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("revoke lease %x: %w", id, err)
	}
	return resp.Header.Revision, nil
}
