package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestSimScale runs simulated nodes in a child process against an embedded
// etcd, places instances on them, and logs the time to register and to run
// everything, the write rate and the agent's heap per simulated node.
// By default it is small (100 nodes, 1,000 instances); the figure is
//
//	CCATTLER_SIM_SCALE=2000x20000 go test -run TestSimScale -v -timeout 30m ./agent/
func TestSimScale(t *testing.T) {
	nodes, insts := 100, 1000
	if v := os.Getenv("CCATTLER_SIM_SCALE"); v != "" {
		if _, err := fmt.Sscanf(v, "%dx%d", &nodes, &insts); err != nil {
			t.Fatalf("CCATTLER_SIM_SCALE=%q: expected NODESxINSTANCES such as 2000x20000", v)
		}
	}
	e := etcdtest.Start(t)
	s := e.Store(t)
	putService(t, s, "web", "nginx:1.28", facts.ServiceCPU("web"), 0.1, facts.ServiceMemory("web"), "64Mi")

	dir := t.TempDir()
	js, _ := json.Marshal(childConfig{Endpoints: e.Endpoints(), Node: "sim-", StateDir: dir, LeaseTTL: 30 * time.Second, Nodes: nodes, Report: true})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	// The agent dies with the test process, even when that is killed by a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, _ := os.Create(filepath.Join(dir, "agent.log"))
	cmd.Stderr = logf
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	var mu sync.Mutex
	var last childStats
	lines := 0 // stats lines read, one a second
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var cs childStats
			if json.Unmarshal(sc.Bytes(), &cs) == nil {
				mu.Lock()
				last = cs
				lines++
				mu.Unlock()
			}
		}
	}()
	stats := func() childStats { mu.Lock(); defer mu.Unlock(); return last }
	read := func() int { mu.Lock(); defer mu.Unlock(); return lines }
	count := func(prefix string) int64 {
		n, _, err := s.Count(context.Background(), prefix)
		if err != nil {
			return -1
		}
		return n
	}

	t0 := time.Now()
	waitFor(t, 5*time.Minute, func() string {
		if n := count("lease/node/"); n != int64(nodes) {
			return fmt.Sprintf("%d of %d leases", n, nodes)
		}
		if st := stats(); st.Leases != nodes {
			return fmt.Sprintf("child holds %d of %d leases", st.Leases, nodes)
		}
		return ""
	})
	registered := time.Since(t0)
	base := stats()

	t1 := time.Now()
	var ops []facts.Op
	flush := func() {
		if _, err := s.Commit(context.Background(), facts.Txn{Ops: ops}); err != nil {
			t.Fatal(err)
		}
		ops = ops[:0]
	}
	for i := 0; i < insts; i++ {
		id := fmt.Sprintf("%08x", i)
		node := fmt.Sprintf("sim-%04d", i%nodes+1)
		ops = append(ops, facts.Put(facts.InstanceService(id), []byte(`"web"`)),
			facts.Put(facts.Placement(id), []byte(`"`+node+`"`)), facts.Put(facts.NodePlacement(node, id), []byte(`"web"`)))
		if len(ops) >= 1000 {
			flush()
		}
	}
	if len(ops) > 0 {
		flush()
	}
	waitFor(t, 10*time.Minute, func() string {
		if st := stats(); st.Running != insts {
			return fmt.Sprintf("%d of %d instances running", st.Running, insts)
		}
		return ""
	})
	// Every instance reported running: state keys under observed/instance/ with "running".
	waitFor(t, 5*time.Minute, func() string {
		fs, _, err := s.List(context.Background(), "observed/instance/", 0)
		if err != nil {
			return err.Error()
		}
		running := 0
		for _, f := range fs {
			if v, _ := facts.StringValue(f.Value); v == "running" {
				running++
			}
		}
		if running != insts {
			return fmt.Sprintf("%d of %d reported running", running, insts)
		}
		return ""
	})
	converged := time.Since(t1)
	// The child prints its counters once a second, so the line read last may
	// predate the writes just seen in etcd. The second line after this point
	// was printed at least a second later and counts them.
	seen := read()
	waitFor(t, time.Minute, func() string {
		if n := read(); n < seen+2 {
			return fmt.Sprintf("%d of 2 stats lines since convergence", n-seen)
		}
		return ""
	})
	done := stats()
	time.Sleep(5 * time.Second)
	idle := stats()

	ops1, txns1 := done.Ops-base.Ops, done.Txns-base.Txns
	t.Logf("%d simulated nodes registered and holding leases in %s", nodes, registered.Round(time.Millisecond))
	t.Logf("%d instances placed, running and reported in %s: %d writes in %d transactions (%.0f writes/s, %.0f txn/s)",
		insts, converged.Round(time.Millisecond), ops1, txns1, float64(ops1)/converged.Seconds(), float64(txns1)/converged.Seconds())
	t.Logf("steady state over 5s: %d writes in %d transactions", idle.Ops-done.Ops, idle.Txns-done.Txns)
	t.Logf("agent heap in use: %.1f MiB, %.1f KiB per simulated node (%d instances each)",
		float64(done.HeapInuse)/(1<<20), float64(done.HeapInuse)/1024/float64(nodes), insts/nodes)
	perNode := float64(idle.HeapLive) / float64(nodes)
	t.Logf("agent live heap: %.1f MiB, %.1f KiB per simulated node", float64(idle.HeapLive)/(1<<20), perNode/1024)
	// What a simulated node holds live grows with its instances and
	// nothing else: about 2.4 KiB an instance (20, 100 and 400 nodes of 10
	// instances: 2.3, 4.4 and 11.3 MiB, of which about 2 MiB is the
	// process's own: the etcd client, the feed's watch). Per instance: the
	// runtime's container (its list is the same memory), the feed's want,
	// what the report last wrote, the feed's facts. The bound is that with
	// room for the machine's variation, so that a per-node cost that grows
	// (a copy of the fleet's facts per node, say) fails here.
	const fixed, perInstance = 3 << 20, 4 * 1024
	if limit := fixed/float64(nodes) + perInstance*float64(insts)/float64(nodes); perNode > limit {
		t.Errorf("a simulated node of %d instances holds %.1f KiB live, want at most %.1f KiB", insts/nodes, perNode/1024, limit/1024)
	}
	if idle.Ops-done.Ops > int64(nodes) {
		t.Errorf("an idle fleet wrote %d facts in 5s: reports are not diffed", idle.Ops-done.Ops)
	}
}
