package facts

import (
	"context"
	"errors"
	"io"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Member is one member of the etcd cluster. A member added but not yet
// started has no Name.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
}

func membersOf(ms []*etcdserverpb.Member) []Member {
	out := make([]Member, len(ms))
	for i, m := range ms {
		out[i] = Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner}
	}
	return out
}

// Members lists the cluster's members.
func (s *Store) Members(ctx context.Context) ([]Member, error) {
	resp, err := s.Client.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	return membersOf(resp.Members), nil
}

// RaftLeader asks the members, at their client URLs in turn, for the id
// of the member that leads the cluster (0: none answered, or none leads).
func (s *Store) RaftLeader(ctx context.Context, ms []Member) uint64 {
	for _, m := range ms {
		for _, u := range m.ClientURLs {
			if st, err := s.Client.Status(ctx, u); err == nil && st.Leader != 0 {
				return st.Leader
			}
		}
	}
	return 0
}

// AddMember adds a member at peerURL, to be started after (etcd expects
// it from now on); it returns the new member and every member after the
// addition.
//
// etcd takes a new member only when a quorum of the members after the
// addition, the new one not counted, have been connected to the member
// asked for the last 5 seconds (its strict reconfiguration check, which
// answers ErrUnhealthyCluster): not in a cluster's first seconds, nor
// while a member is down. Nothing is proposed then, so AddMember asks
// again until ctx ends, calling waiting (when not nil) before the first
// wait.
func (s *Store) AddMember(ctx context.Context, peerURL string, waiting func(reason error)) (Member, []Member, error) {
	for first := true; ; first = false {
		resp, err := s.Client.MemberAdd(ctx, []string{peerURL})
		if err == nil {
			return membersOf([]*etcdserverpb.Member{resp.Member})[0], membersOf(resp.Members), nil
		}
		if !errors.Is(err, ErrUnhealthyCluster) || ctx.Err() != nil {
			return Member{}, nil, err
		}
		if first && waiting != nil {
			waiting(err)
		}
		if !Sleep(ctx, addMemberRetry) {
			return Member{}, nil, err
		}
	}
}

// ErrUnhealthyCluster is etcd's refusal of a membership change that its
// members' connections do not yet make safe.
var ErrUnhealthyCluster = rpctypes.ErrUnhealthy

// addMemberRetry is how often AddMember asks again.
const addMemberRetry = 250 * time.Millisecond

// RemoveMember removes the member with the given id; its etcd stops.
func (s *Store) RemoveMember(ctx context.Context, id uint64) error {
	_, err := s.Client.MemberRemove(ctx, id)
	return err
}

// Snapshot streams a consistent snapshot of the whole keyspace (etcd's
// backend); the caller closes it.
func (s *Store) Snapshot(ctx context.Context) (io.ReadCloser, error) { return s.Client.Snapshot(ctx) }
