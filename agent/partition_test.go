package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// An agent started while etcd is down works from its cache, and once etcd
// answers it follows placements again.
func TestAgentStartedWithoutEtcd(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	putService(t, s, "web", "nginx:1.28")
	put(t, s, facts.InstanceService("aaaaa"), "web", facts.Placement("aaaaa"), "sim-0001", facts.NodePlacement("sim-0001", "aaaaa"), "web")
	e.Close()

	store, err := agent.Connect(e.Endpoints(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fleet, _ := sim.NewFleet(sim.NewConfig())
	startAgent(t, fastConfig(store, t.TempDir()), simNodes(fleet, "sim-", 1))
	time.Sleep(6 * time.Second)
	e.Restart(t)
	waitFor(t, 30*time.Second, func() string {
		if st := values(t, s, facts.InstanceState("aaaaa"))[facts.InstanceState("aaaaa")]; st != "running" {
			return "state " + st
		}
		return ""
	})
	put(t, s, facts.InstanceService("bbbbb"), "web", facts.Placement("bbbbb"), "sim-0001", facts.NodePlacement("sim-0001", "bbbbb"), "web")
	del(t, s, facts.Placement("aaaaa"), facts.NodePlacement("sim-0001", "aaaaa"))
	waitFor(t, 30*time.Second, func() string {
		got := values(t, s, "observed/instance/")
		if got[facts.InstanceState("aaaaa")] != "stopped" || got[facts.InstanceState("bbbbb")] != "running" {
			return "placements after the outage not followed"
		}
		if len(values(t, s, facts.Lease("sim-0001"))) != 1 {
			return "no lease"
		}
		return ""
	})
}

func running(t *testing.T, rt agent.Runtime) map[string]bool {
	t.Helper()
	list, err := rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, st := range list {
		if st.Running {
			out[st.Spec.ID] = true
		}
	}
	return out
}

// A corrupt cache, found by an agent started while etcd is down, is
// reported and changes nothing: the running containers are adopted and kept.
func TestCorruptCacheTakesNoDestructiveAction(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	putService(t, s, "web", "nginx:1.28")
	put(t, s, facts.InstanceService("aaaaa"), "web", facts.Placement("aaaaa"), "sim-0001", facts.NodePlacement("sim-0001", "aaaaa"), "web",
		facts.InstanceService("bbbbb"), "web", facts.Placement("bbbbb"), "sim-0001", facts.NodePlacement("sim-0001", "bbbbb"), "web")
	fleet, _ := sim.NewFleet(sim.NewConfig())
	nodes := simNodes(fleet, "sim-", 1)
	dir := t.TempDir()
	_, stop := startAgent(t, fastConfig(s, dir), nodes)
	waitFor(t, 20*time.Second, func() string {
		if r := running(t, nodes[0].Runtime); len(r) != 2 {
			return fmt.Sprintf("%d running", len(r))
		}
		return ""
	})
	stop()
	path := filepath.Join(dir, "node-sim-0001.cache")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-3] ^= 0x20
	os.WriteFile(path, raw, 0o600)
	e.Close()

	store, err := agent.Connect(e.Endpoints(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	startAgent(t, fastConfig(store, dir), nodes)
	for i := 0; i < 3; i++ {
		time.Sleep(time.Second)
		if r := running(t, nodes[0].Runtime); len(r) != 2 {
			t.Fatalf("while cut off with a corrupt cache: %d running, want 2", len(r))
		}
	}
	e.Restart(t)
	waitFor(t, 30*time.Second, func() string {
		v := values(t, s, facts.NodeCacheError(nodes[0].ID))[facts.NodeCacheError(nodes[0].ID)]
		if !strings.Contains(v, "checksum") {
			return "no cache_error fact naming the checksum: " + v
		}
		if ev := values(t, s, "event/"); len(ev) > 0 {
			t.Fatalf("the agent wrote under event/: %v", ev)
		}
		return ""
	})
	if _, err := os.Stat(path + ".corrupt"); err != nil {
		t.Errorf("the corrupt cache was not kept for inspection: %v", err)
	}
	waitFor(t, 10*time.Second, func() string {
		if b, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(b), "ccattler-agent-cache v1") {
			return "cache not rewritten"
		}
		return ""
	})
	if r := running(t, nodes[0].Runtime); len(r) != 2 {
		t.Fatalf("after etcd returned: %d running, want 2", len(r))
	}
}

// A revoked lease (as after an expiry) is replaced and the node registers again.
func TestLostLeaseIsReplaced(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	fleet, _ := sim.NewFleet(sim.NewConfig())
	startAgent(t, fastConfig(s, t.TempDir()), simNodes(fleet, "sim-", 3))
	leaseOf := func(node string) facts.LeaseID {
		f, ok, err := s.Get(context.Background(), facts.Lease(node))
		if err != nil || !ok {
			return 0
		}
		return facts.LeaseID(f.Lease)
	}
	var first facts.LeaseID
	waitFor(t, 20*time.Second, func() string {
		if first = leaseOf("sim-0002"); first == 0 {
			return "no lease"
		}
		return ""
	})
	// Someone (an operator, the failure controller) clobbers the node state meanwhile.
	put(t, s, facts.NodeState("sim-0002"), "unreachable")
	if err := s.Revoke(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() string {
		if l := leaseOf("sim-0002"); l == 0 || l == first {
			return "lease not replaced"
		}
		if st := values(t, s, facts.NodeState("sim-0002"))[facts.NodeState("sim-0002")]; st != "alive" {
			return "node state " + st
		}
		return ""
	})

	// An operator's drain survives the agent registering again.
	drained := leaseOf("sim-0003")
	put(t, s, facts.NodeState("sim-0003"), "draining")
	if err := s.Revoke(context.Background(), drained); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() string {
		if l := leaseOf("sim-0003"); l == 0 || l == drained {
			return "lease of sim-0003 not replaced"
		}
		return ""
	})
	time.Sleep(time.Second) // a few report rounds
	if st := values(t, s, facts.NodeState("sim-0003"))[facts.NodeState("sim-0003")]; st != "draining" {
		t.Fatalf("node state %q after re-registration, want draining kept", st)
	}
}
