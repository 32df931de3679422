package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// An agent can be run in a child process (the test binary re-executed), so
// that a test can freeze it with SIGSTOP like a stalled machine.
const childEnv = "CCATTLER_AGENT_CHILD"

type childConfig struct {
	Endpoints []string
	Node      string
	StateDir  string
	LeaseTTL  time.Duration
	Nodes     int  // simulated nodes; 0 means 1
	Report    bool // print Stats and heap size as a JSON line on stdout every second
}

func TestMain(m *testing.M) {
	if js := os.Getenv(childEnv); js != "" {
		os.Exit(runChild(js))
	}
	os.Exit(m.Run())
}

func runChild(js string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(js), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	if os.Getenv(profileEnv) != "" {
		runtime.MemProfileRate = 512
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	store, err := agent.Connect(cc.Endpoints, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fleet, _ := sim.NewFleet(sim.NewConfig())
	cfg := fastConfig(store, cc.StateDir)
	cfg.LeaseTTL = cc.LeaseTTL
	if cc.Nodes > 1 {
		cfg.Resync = 5 * time.Second // what a large simulated fleet would use
	}
	a, err := agent.New(cfg, simNodes(fleet, cc.Node, max(cc.Nodes, 1)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cc.Report {
		go reportStats(ctx, a)
	}
	a.Run(ctx)
	return 0
}

func TestFrozenAgentReplacesItsExpiredLease(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	dir := t.TempDir()
	js, _ := json.Marshal(childConfig{Endpoints: e.Endpoints(), Node: "frozen-", StateDir: dir, LeaseTTL: 2 * time.Second})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	// The agent dies with the test process, even when that is killed by a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, _ := os.Create(filepath.Join(dir, "agent.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGCONT); cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	const node = "frozen-0001"
	leaseOf := func() int64 {
		f, ok, err := s.Get(context.Background(), facts.Lease(node))
		if err != nil || !ok {
			return 0
		}
		return f.Lease
	}
	var first int64
	waitFor(t, 20*time.Second, func() string {
		if first = leaseOf(); first == 0 {
			return "no lease"
		}
		return ""
	})
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() string {
		if leaseOf() != 0 {
			return "the frozen agent's lease has not expired"
		}
		return ""
	})
	rev := currentRev(t, s)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() string {
		l := leaseOf()
		if l == 0 || l == first {
			return fmt.Sprintf("lease %x after resume (first %x)", l, first)
		}
		f, ok, _ := s.Get(context.Background(), facts.NodeState(node))
		if !ok || f.ModRevision <= rev {
			return "node not registered again"
		}
		return ""
	})
}

// childStats is what a reporting child prints.
type childStats struct {
	agent.Stats
	HeapInuse uint64
	HeapLive  uint64 // what the collection just before found live
}

func reportStats(ctx context.Context, a *agent.Agent) {
	enc := json.NewEncoder(os.Stdout)
	for ctx.Err() == nil {
		time.Sleep(time.Second)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		enc.Encode(childStats{Stats: a.Stats(), HeapInuse: ms.HeapInuse, HeapLive: ms.HeapAlloc})
		if p := os.Getenv(profileEnv); p != "" {
			writeProfile(p, "heap", 0)
			writeProfile(p+".goroutines", "goroutine", 1)
		}
	}
}

// profileEnv names a file a reporting child writes its heap profile to
// (sampled every 512 bytes), and its goroutines to the file plus
// .goroutines, every second: where a simulated node's memory goes, e.g.
// CCATTLER_SIM_HEAP=/tmp/sim.heap CCATTLER_SIM_SCALE=400x4000 go test
// ./agent -run TestSimScale, then go tool pprof -sample_index=inuse_space.
const profileEnv = "CCATTLER_SIM_HEAP"

func writeProfile(path, name string, debug int) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

func currentRev(t *testing.T, s *facts.Store) int64 {
	t.Helper()
	rev, err := s.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}
