package facts

import (
	"context"
	"io"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
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
func (s *Store) AddMember(ctx context.Context, peerURL string) (Member, []Member, error) {
	resp, err := s.Client.MemberAdd(ctx, []string{peerURL})
	if err != nil {
		return Member{}, nil, err
	}
	return membersOf([]*etcdserverpb.Member{resp.Member})[0], membersOf(resp.Members), nil
}

// RemoveMember removes the member with the given id; its etcd stops.
func (s *Store) RemoveMember(ctx context.Context, id uint64) error {
	_, err := s.Client.MemberRemove(ctx, id)
	return err
}

// Snapshot streams a consistent snapshot of the whole keyspace (etcd's
// backend); the caller closes it.
func (s *Store) Snapshot(ctx context.Context) (io.ReadCloser, error) { return s.Client.Snapshot(ctx) }
