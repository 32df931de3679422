package facts_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// What the fault tests ask etcd of Raft and of the election, through Store
// on a real (secure) member: a member's status, names it and its leader and
// agrees with the store's revision; a move of the leadership to the leader
// is done, one to no member names the leader asked; the oldest campaign is
// elected, with the revision its term began at.
func TestRaftStatusMoveAndElection(t *testing.T) {
	e := etcdtest.StartSecure(t)
	s := e.StoreAs(t, access.Root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep := s.Endpoints()[0]
	st, err := s.MemberStatus(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || st.ID != ms[0].ID || st.Leader != st.ID || st.RaftTerm == 0 {
		t.Errorf("status %+v of the one member %+v: want it leading itself, in a term", st, ms)
	}
	rev := put(t, s, "desired/service/web/image", `"nginx:1.29"`)
	if st, err := s.MemberStatus(ctx, ep); err != nil || st.Revision < rev {
		t.Errorf("status after a write at %d: %+v, %v", rev, st, err)
	}
	if now, err := s.Revision(ctx); err != nil || now < rev {
		t.Errorf("Revision = %d, %v after a write at %d", now, err, rev)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	_, err = s.MemberStatus(short, "https://127.0.0.1:1")
	cancelShort()
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("status of no member: %v, want an error naming its endpoint", err)
	}

	if err := s.MoveLeader(ctx, st.ID); err != nil {
		t.Errorf("move the leadership to the leader: %v", err)
	}
	if err := s.MoveLeader(ctx, st.ID+1); err == nil || !strings.Contains(err.Error(), ep) {
		t.Errorf("move the leadership to no member: %v, want an error naming the leader asked (%s)", err, ep)
	}

	const prefix = "/ccattler-test-election/"
	if id, rev, err := s.Elected(ctx, prefix); err != nil || id != "" || rev != 0 {
		t.Errorf("Elected with nobody campaigning = %q at %d, %v", id, rev, err)
	}
	first, err := s.Campaign(ctx, prefix, "server-1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	// A second campaign waits behind the first: it is not elected.
	wait, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	go func() {
		if c, err := s.Campaign(wait, prefix, "server-2", 5*time.Second); err == nil {
			c.Close()
		}
	}()
	time.Sleep(100 * time.Millisecond)
	if id, rev, err := s.Elected(ctx, prefix); err != nil || id != "server-1" || rev != first.Rev() {
		t.Errorf("Elected = %q at %d, %v; want server-1 at %d", id, rev, err, first.Rev())
	}
	if id, err := s.Leader(ctx, prefix); err != nil || id != "server-1" {
		t.Errorf("Leader = %q, %v; want server-1", id, err)
	}
}
