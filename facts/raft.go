package facts

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MemberStatus is what one etcd member says of itself and of Raft.
type MemberStatus struct {
	ID       uint64 // the member answering
	Leader   uint64 // the member it follows as Raft leader (0: none)
	RaftTerm uint64
	Revision int64 // the store's revision as the member has applied it
}

// MemberStatus asks the member at endpoint (one of its client URLs) alone,
// whichever member the store's connection uses otherwise: a member cut off
// from the others still answers, with what it last knew.
func (s *Store) MemberStatus(ctx context.Context, endpoint string) (MemberStatus, error) {
	st, err := s.Client.Status(ctx, endpoint)
	if err != nil {
		return MemberStatus{}, fmt.Errorf("status of the etcd member at %s: %w", endpoint, err)
	}
	return MemberStatus{ID: st.Header.MemberId, Leader: st.Leader, RaftTerm: st.RaftTerm, Revision: st.Header.Revision}, nil
}

// MoveLeader makes the member with id the Raft leader. etcd takes the
// request from the leader only: it is sent there, the leader found among
// the store's endpoints.
func (s *Store) MoveLeader(ctx context.Context, id uint64) error {
	leader := ""
	var errs []error
	for _, ep := range s.Client.Endpoints() {
		st, err := s.MemberStatus(ctx, ep)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Leader == st.ID {
			leader = ep
			break
		}
	}
	if leader == "" {
		return fmt.Errorf("move the etcd leadership to %x: no leader among %v: %w", id, s.Client.Endpoints(), errors.Join(errs...))
	}
	conn, err := s.Client.Dial(leader) // the client's credentials, this endpoint alone
	if err != nil {
		return fmt.Errorf("move the etcd leadership to %x: dial the leader at %s: %w", id, leader, err)
	}
	defer conn.Close()
	if _, err := clientv3.NewMaintenanceFromMaintenanceClient(pb.NewMaintenanceClient(conn), s.Client).MoveLeader(ctx, id); err != nil {
		return fmt.Errorf("move the etcd leadership to %x (asked of %s): %w", id, leader, err)
	}
	return nil
}

// Elected returns the value of the oldest campaign under prefix (absolute),
// the one elected, and the revision its key was created at: the start of
// its term. identity is "" and rev 0 when nobody campaigns.
func (s *Store) Elected(ctx context.Context, prefix string) (identity string, rev int64, err error) {
	resp, err := s.Client.Get(ctx, prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, err // callers say which election
	}
	if len(resp.Kvs) == 0 {
		return "", 0, nil
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision, nil
}
