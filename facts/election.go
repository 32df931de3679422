package facts

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Guard is a compare a transaction needs besides its Conds (Txn.Guard): on
// an absolute etcd key, which may lie outside the root.
type Guard struct{ cmp clientv3.Cmp }

// CreatedAt is the guard that the key at absKey exists with create revision
// rev. The engine guards every commit with its election key this way, so
// that a deposed leader's transaction fails: the key it campaigned with is
// gone, or another campaign's.
func CreatedAt(absKey string, rev int64) Guard {
	return Guard{clientv3.Compare(clientv3.CreateRevision(absKey), "=", rev)}
}

// LeaseID names an etcd lease (Grant); a put on it (Op.Lease) goes when the
// lease ends.
type LeaseID = clientv3.LeaseID

// Campaign is a won campaign in an election: etcd's election recipe
// (client/v3/concurrency), a key under the election's prefix on a session
// lease, the oldest key winning.
type Campaign struct {
	sess *concurrency.Session
	el   *concurrency.Election
}

// Campaign opens a session whose lease has the given TTL and campaigns under
// prefix (absolute, outside the root) with value identity. It returns once
// elected; an error when the session cannot open or ctx ends first (the
// session is then closed). The session then lasts until Close, or ends by
// itself (Done) when etcd is unreachable for longer than ttl or its lease
// is revoked.
func (s *Store) Campaign(ctx context.Context, prefix, identity string, ttl time.Duration) (*Campaign, error) {
	sess, err := concurrency.NewSession(s.Client, concurrency.WithTTL(int(ttl/time.Second)), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("open election session: %w", err)
	}
	el := concurrency.NewElection(sess, prefix)
	// etcd's Campaign, cancelled while it waits, deletes its key with the
	// client's own context before it returns: without a quorum that waits
	// as long as etcd is away, and a server stopping last of three took
	// 8 s. So the wait is left behind when ctx ends: the session's lease,
	// revoked by Close or expired, takes the key with it either way.
	campaigned := make(chan error, 1)
	go func() { campaigned <- el.Campaign(ctx, identity) }()
	select {
	case err = <-campaigned:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		_ = sess.Close()
		return nil, fmt.Errorf("campaign under %s: %w", prefix, err)
	}
	return &Campaign{sess: sess, el: el}, nil
}

// Key is the campaign's election key (absolute); "" after Resign.
func (c *Campaign) Key() string { return c.el.Key() }

// Rev is the create revision of the election key; 0 after Resign.
func (c *Campaign) Rev() int64 { return c.el.Rev() }

// Done is closed when the session ends: the campaign's key is gone then.
func (c *Campaign) Done() <-chan struct{} { return c.sess.Done() }

// Resign deletes the election key, so that the next campaign wins at once.
func (c *Campaign) Resign(ctx context.Context) error { return c.el.Resign(ctx) }

// Close ends the session and revokes its lease, which deletes the key.
func (c *Campaign) Close() error { return c.sess.Close() }

// Leader returns the value of the oldest campaign under prefix (absolute),
// the one elected, or "" when nobody campaigns.
func (s *Store) Leader(ctx context.Context, prefix string) (string, error) {
	id, _, err := s.Elected(ctx, prefix)
	return id, err
}

// CreateRevision returns the create revision of the key at absKey, under
// the root or not (0: the key does not exist).
func (s *Store) CreateRevision(ctx context.Context, absKey string) (int64, error) {
	resp, err := s.Client.Get(ctx, absKey)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", absKey, err)
	}
	if len(resp.Kvs) != 1 {
		return 0, nil
	}
	return resp.Kvs[0].CreateRevision, nil
}
