package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// startCluster starts three members of one new cluster in-process, at
// once, as three servers bootstrap.
func startCluster(t *testing.T) []*embedded.Etcd {
	t.Helper()
	names := []string{"s1", "s2", "s3"}
	cfgs := make([]embedded.Config, len(names))
	var initial []string
	for i, n := range names {
		c := embedded.NewConfig()
		c.Name, c.DataDir = n, t.TempDir()
		c.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
		c.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
		cfgs[i] = c
		initial = append(initial, n+"="+c.PeerURL)
	}
	members := make([]*embedded.Etcd, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(initial, ",")
		wg.Go(func() { members[i], errs[i] = embedded.Start(cfgs[i]) })
	}
	wg.Wait()
	for i, m := range members {
		if m != nil {
			t.Cleanup(m.Close)
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	return members
}

// A member added in a cluster's first seconds is taken: etcd refuses it
// until a quorum of the members have been connected for 5s, and AddMember
// asks again, saying so once, rather than failing. Before, `ccattler
// cluster member add` right after a cluster formed or a member was
// removed failed with "etcdserver: unhealthy cluster".
func TestAddMemberWaitsForAConnectedQuorum(t *testing.T) {
	members := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := facts.Dial(ctx, facts.StoreConfig{Endpoints: members[0].Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Straight away, etcd itself refuses (the test's premise).
	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	if _, err := s.Client.MemberAdd(ctx, []string{peer}); !errors.Is(err, facts.ErrUnhealthyCluster) {
		t.Fatalf("etcd's own member add within 5s of the cluster forming: %v, want %v", err, facts.ErrUnhealthyCluster)
	}
	var waited []error
	start := time.Now()
	added, all, err := s.AddMember(ctx, peer, func(reason error) { waited = append(waited, reason) })
	if err != nil {
		t.Fatalf("AddMember: %v", err)
	}
	t.Logf("added after %s", time.Since(start).Round(time.Millisecond))
	if len(waited) != 1 || !errors.Is(waited[0], facts.ErrUnhealthyCluster) {
		t.Errorf("waiting called with %v, want once with %v", waited, facts.ErrUnhealthyCluster)
	}
	if len(all) != 4 || added.Name != "" || len(added.PeerURLs) != 1 || added.PeerURLs[0] != peer {
		t.Errorf("added %+v, all %d members; want the unstarted member at %s among 4", added, len(all), peer)
	}
	if err := s.RemoveMember(ctx, added.ID); err != nil { // not to be started: out of the quorum again
		t.Fatal(err)
	}

	// A deadline still ends the asking, with etcd's reason.
	members[2].Close()
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	_, _, err = s.AddMember(short, fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)), nil)
	if !errors.Is(err, facts.ErrUnhealthyCluster) {
		t.Errorf("AddMember with a member down and a 1s deadline: %v, want %v", err, facts.ErrUnhealthyCluster)
	}
}
