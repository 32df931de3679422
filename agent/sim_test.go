package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// testLog is quiet unless CCATTLER_TEST_LOG is set.
func testLog() *slog.Logger {
	if os.Getenv("CCATTLER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// waitFor polls cond until it returns "" (done) or the timeout passes; the
// last non-empty answer says what was still missing.
func waitFor(t testing.TB, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		if last = cond(); last == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("after %s: %s", timeout, last)
}

// put writes facts through the schema, failing the test on error.
func put(t testing.TB, s *facts.Store, kv ...any) {
	t.Helper()
	var ops []facts.Op
	for i := 0; i < len(kv); i += 2 {
		raw, err := s.Schema.Encode(kv[i].(string), kv[i+1])
		if err != nil {
			t.Fatalf("encode %s: %v", kv[i], err)
		}
		ops = append(ops, facts.Put(kv[i].(string), raw))
	}
	if _, err := s.Commit(context.Background(), facts.Txn{Ops: ops}); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func del(t testing.TB, s *facts.Store, keys ...string) {
	t.Helper()
	var ops []facts.Op
	for _, k := range keys {
		ops = append(ops, facts.Delete(k))
	}
	if _, err := s.Commit(context.Background(), facts.Txn{Ops: ops}); err != nil {
		t.Fatalf("delete: %v", err)
	}
}

// values lists a prefix as key -> decoded string (JSON strings unquoted).
func values(t testing.TB, s *facts.Store, prefix string) map[string]string {
	t.Helper()
	fs, _, err := s.List(context.Background(), prefix, 0)
	if err != nil {
		t.Fatalf("list %s: %v", prefix, err)
	}
	out := map[string]string{}
	for _, f := range fs {
		v, ok := facts.StringValue(f.Value)
		if !ok {
			v = string(f.Value)
		}
		out[f.Key] = v
	}
	return out
}

func putService(t testing.TB, s *facts.Store, name, image string, extra ...any) {
	t.Helper()
	kv := []any{facts.DesiredService(name), map[string]any{}, facts.ServiceImage(name), image}
	put(t, s, append(kv, extra...)...)
}

func simNodes(fleet *sim.Fleet, prefix string, n int) []agent.NodeConfig {
	var out []agent.NodeConfig
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%s%04d", prefix, i)
		out = append(out, agent.NodeConfig{ID: id, CPU: 4, Memory: 8 << 30, Architecture: "amd64",
			Zone: "sim-1", Runtime: fleet.Node(id)})
	}
	return out
}

// startAgent runs an agent until the test ends or stop is called.
func startAgent(t testing.TB, cfg agent.Config, nodes []agent.NodeConfig) (a *agent.Agent, stop func()) {
	t.Helper()
	a, err := agent.New(cfg, nodes)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return a, stop
}

// cfgTTL is the lease TTL of the in-process test agents.
const cfgTTL = 5 * time.Second

func fastConfig(s *facts.Store, dir string) agent.Config {
	cfg := agent.NewConfig()
	cfg.Store, cfg.StateDir, cfg.Log = s, dir, testLog()
	cfg.Resync, cfg.Probe, cfg.Grace = 300*time.Millisecond, 300*time.Millisecond, time.Second
	cfg.LeaseTTL = cfgTTL
	cfg.SyncCache = false
	cfg.MaxBatch = 1000
	return cfg
}

func TestSimNodesRegisterRunAndReport(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	fleet, err := sim.NewFleet(sim.Config{StartDelay: 20 * time.Millisecond, Range: sim.NewConfig().Range, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	const nNodes, nInst = 50, 200
	nodes := simNodes(fleet, "sim-", nNodes)
	startAgent(t, fastConfig(s, t.TempDir()), nodes)

	waitFor(t, 20*time.Second, func() string {
		leases := values(t, s, "lease/node/")
		states := values(t, s, "observed/node/")
		alive := 0
		for k, v := range states {
			if strings.HasSuffix(k, "/state") && v == "alive" {
				alive++
			}
		}
		if len(leases) != nNodes || alive != nNodes {
			return fmt.Sprintf("%d leases and %d alive nodes of %d", len(leases), alive, nNodes)
		}
		return ""
	})
	registered := time.Now()
	leaseIDs := func() map[string]int64 {
		fs, _, err := s.List(context.Background(), "lease/node/", 0)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, f := range fs {
			out[f.Key] = f.Lease
		}
		return out
	}
	firstLeases := leaseIDs()
	defer t.Run("every node keeps its lease alive past the TTL", func(t *testing.T) {
		if d := cfgTTL - time.Since(registered) + time.Second; d > 0 {
			time.Sleep(d)
		}
		now := leaseIDs()
		if len(now) != nNodes {
			t.Fatalf("%d leases, want %d", len(now), nNodes)
		}
		for k, id := range firstLeases {
			if now[k] != id {
				t.Errorf("%s: lease %x replaced by %x: it was not kept alive", k, id, now[k])
			}
		}
	})
	want := map[string]string{
		"observed/node/sim-0001": "{}", "observed/node/sim-0001/state": "alive",
		"observed/node/sim-0001/capacity/cpu": "4", "observed/node/sim-0001/capacity/memory": "8Gi",
		"observed/node/sim-0001/available/cpu": "4", "observed/node/sim-0001/available/memory": "8Gi",
		"observed/node/sim-0001/architecture": "amd64", "observed/node/sim-0001/zone": "sim-1",
	}
	waitFor(t, 10*time.Second, func() string {
		got := values(t, s, "observed/node/sim-0001")
		for k, v := range want {
			if got[k] != v {
				return fmt.Sprintf("%s = %q, want %q", k, got[k], v)
			}
		}
		return ""
	})

	putService(t, s, "web", "nginx:1.28", facts.ServiceCPU("web"), 0.5, facts.ServiceMemory("web"), "256Mi",
		facts.ServiceExpose("web", 8080), map[string]any{})
	ids := make([]string, nInst)
	var kv []any
	for i := range ids {
		ids[i] = fmt.Sprintf("a%04x", i)
		kv = append(kv, facts.InstanceService(ids[i]), "web", facts.Placement(ids[i]), nodes[i%nNodes].ID, facts.NodePlacement(nodes[i%nNodes].ID, ids[i]), "web")
	}
	put(t, s, kv...)
	waitFor(t, 30*time.Second, func() string {
		obs := values(t, s, "observed/instance/")
		for i, id := range ids {
			if obs[facts.InstanceState(id)] != "running" || obs[facts.InstanceNode(id)] != nodes[i%nNodes].ID ||
				obs[facts.InstanceHealth(id)] != "healthy" || obs[facts.InstanceIP(id)] == "" ||
				obs[facts.InstanceImage(id)] != "nginx:1.28" || obs[facts.InstanceStartedAt(id)] == "" {
				return fmt.Sprintf("instance %s not reported running: %v", id, obs[facts.InstanceState(id)])
			}
		}
		return ""
	})
	// 4 instances of 0.5 cpu and 256Mi each on sim-0001.
	waitFor(t, 10*time.Second, func() string {
		got := values(t, s, "observed/node/sim-0001/available/")
		if got["observed/node/sim-0001/available/cpu"] != "2" || got["observed/node/sim-0001/available/memory"] != "7Gi" {
			return fmt.Sprintf("available: %v", got)
		}
		return ""
	})

	t.Run("unplaced instances are stopped and reported stopped", func(t *testing.T) {
		del(t, s, facts.Placement(ids[0]), facts.Placement(ids[1]),
			facts.NodePlacement(nodes[0].ID, ids[0]), facts.NodePlacement(nodes[1%nNodes].ID, ids[1]))
		waitFor(t, 10*time.Second, func() string {
			obs := values(t, s, "observed/instance/")
			for _, id := range ids[:2] {
				if obs[facts.InstanceState(id)] != "stopped" {
					return fmt.Sprintf("%s is %q", id, obs[facts.InstanceState(id)])
				}
			}
			return ""
		})
	})
	t.Run("an exited container is reported failed with its exit status, not restarted", func(t *testing.T) {
		id, node := ids[2], nodes[2].ID
		if !fleet.Exit(node, id, 137) {
			t.Fatalf("no container %s on %s", id, node)
		}
		waitFor(t, 10*time.Second, func() string {
			if st := values(t, s, facts.InstanceState(id))[facts.InstanceState(id)]; st != "failed" {
				return "state " + st
			}
			obs := values(t, s, facts.Instance(id)+"/")
			if obs[facts.InstanceExitStatus(id)] != "137" || !strings.Contains(obs[facts.InstanceReason(id)], "137") {
				return fmt.Sprintf("exit status %q, reason %q", obs[facts.InstanceExitStatus(id)], obs[facts.InstanceReason(id)])
			}
			return ""
		})
		time.Sleep(time.Second) // several reconcile rounds
		if st := values(t, s, facts.InstanceState(id))[facts.InstanceState(id)]; st != "failed" {
			t.Fatalf("failed instance became %q: restarted", st)
		}
	})
	t.Run("a service with an invalid memory quantity fails its instance with the reason", func(t *testing.T) {
		// Written raw, past validation, as a broken writer might.
		if _, err := etcdtest.PutRaw(context.Background(), s, facts.ServiceMemory("bad"), `"12XB"`); err != nil {
			t.Fatal(err)
		}
		putService(t, s, "bad", "nginx:1.28")
		put(t, s, facts.InstanceService("bbbbb"), "bad", facts.Placement("bbbbb"), nodes[0].ID, facts.NodePlacement(nodes[0].ID, "bbbbb"), "bad")
		waitFor(t, 10*time.Second, func() string {
			if st := values(t, s, facts.InstanceState("bbbbb"))[facts.InstanceState("bbbbb")]; st != "failed" {
				return "state " + st
			}
			if r := values(t, s, facts.InstanceReason("bbbbb"))[facts.InstanceReason("bbbbb")]; !strings.Contains(r, "12XB") {
				return "reason " + r
			}
			if ev := values(t, s, "event/"); len(ev) > 0 {
				t.Fatalf("the agent wrote under event/: %v", ev)
			}
			return ""
		})
	})
}

// A node takes its lease as soon as etcd first answers the agent, not a
// probe interval later: with the probe's minute here, a node that waited
// for it would miss the deadline by far.
func TestNodeTakesItsLeaseOnceEtcdAnswers(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	fleet, err := sim.NewFleet(sim.Config{StartDelay: 20 * time.Millisecond, Range: sim.NewConfig().Range, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(s, t.TempDir())
	cfg.Probe = time.Minute
	started := time.Now()
	startAgent(t, cfg, simNodes(fleet, "quick-", 1))
	waitFor(t, 10*time.Second, func() string {
		if len(values(t, s, "lease/node/")) != 1 {
			return "no lease/node/quick-0001 yet"
		}
		return ""
	})
	t.Logf("lease held %s after the agent started", time.Since(started).Round(time.Millisecond))
}

// A probe etcd refuses is tried again soon, not a probe interval later:
// here the node's grants are written after the agent started (as when
// `ccattler auth add` and the agent race), and with the probe's minute a
// link that waited for it would miss the deadline by far.
func TestLinkRetriesARefusedProbeSoon(t *testing.T) {
	e := etcdtest.StartSecure(t)
	node := e.StoreAs(t, "node:quick-0001") // no grants yet: every read is refused
	fleet, err := sim.NewFleet(sim.Config{StartDelay: 20 * time.Millisecond, Range: sim.NewConfig().Range, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(node, t.TempDir())
	cfg.Probe = time.Minute
	startAgent(t, cfg, simNodes(fleet, "quick-", 1))
	time.Sleep(300 * time.Millisecond) // the first probes are refused
	e.Admit(t, nil, "node:quick-0001")
	admitted := time.Now()
	root := e.StoreAs(t, access.Root)
	waitFor(t, 10*time.Second, func() string {
		if len(values(t, root, "lease/node/")) != 1 {
			return "no lease/node/quick-0001 yet"
		}
		return ""
	})
	t.Logf("lease held %s after the grants", time.Since(admitted).Round(time.Millisecond))
}
