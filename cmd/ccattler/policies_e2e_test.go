package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// The default policies end to end: the real binary's server (embedded etcd,
// engine, built-in policies) and real agent processes with simulated
// containers. Agents are frozen with SIGSTOP to cut them off: their leases
// expire while their containers keep running, as in a partition.

const (
	e2eLeaseTTL = 3 * time.Second
	e2eGrace    = 12 * time.Second // the default failure policy's grace period
)

// cluster is a server with its agents and a client to watch the facts.
type cluster struct {
	t      *testing.T
	srv    *server
	store  *facts.Store
	agents map[string]*exec.Cmd
}

func newCluster(t *testing.T) *cluster { t.Helper(); return newClusterArgs(t) }

// newClusterArgs is newCluster with more server flags.
func newClusterArgs(t *testing.T, args ...string) *cluster {
	t.Helper()
	srv := startServer(t, append([]string{"--data-dir", t.TempDir(),
		"--listen-client", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))}, args...)...)
	return &cluster{t: t, srv: srv, store: srv.dial(t), agents: map[string]*exec.Cmd{}}
}

// agent starts `ccattler agent --runtime sim` as its own process.
func (c *cluster) agent(name string, args ...string) {
	c.t.Helper()
	cmd := exec.Command(bin, append(append(c.srv.agentFlags(c.t, agentPrincipal(args)), "agent", "--runtime", "sim",
		"--state-dir", filepath.Join(c.t.TempDir(), name), "--lease-ttl", e2eLeaseTTL.String(),
		"--sim-start-delay", "50ms", "--cpu", "4", "--memory", "8Gi", "--zone", "zone-1"), args...)...)
	cmd.Stdout, cmd.Stderr = nil, nil
	if testing.Verbose() {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.agents[name] = cmd
	c.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}

func (c *cluster) signal(name string, sig syscall.Signal) {
	c.t.Helper()
	if err := c.agents[name].Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %s: %v", name, err)
	}
}

// list returns key -> value under prefix.
func (c *cluster) list(prefix string) map[string]string {
	c.t.Helper()
	fs, _, err := c.store.List(context.Background(), prefix, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range fs {
		out[f.Key] = string(f.Value)
	}
	return out
}

func (c *cluster) get(key string) string {
	f, ok, err := c.store.Get(context.Background(), key)
	if err != nil {
		c.t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return string(f.Value)
}

// waitFor polls cond until it holds or the time is up.
func (c *cluster) waitFor(within time.Duration, what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("not within %s: %s\nfacts:\n%s", within, what, c.dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cluster) dump() string {
	var lines []string
	for k, v := range c.list("") {
		if !strings.HasPrefix(k, "schema/") && !strings.HasPrefix(k, "event/") {
			lines = append(lines, k+" = "+v)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// instance is what the facts say of one instance.
type instance struct{ id, service, state, node, placed, ip, health string }

func (c *cluster) instances() map[string]instance {
	out := map[string]instance{}
	place := c.list("placement/instance/")
	for k, v := range c.list("observed/instance/") {
		parts := strings.Split(k, "/")
		if len(parts) != 4 {
			continue
		}
		in := out[parts[2]]
		in.id = parts[2]
		in.placed = strings.Trim(place[facts.Placement(parts[2])], `"`)
		v = strings.Trim(v, `"`)
		switch parts[3] {
		case "service":
			in.service = v
		case "state":
			in.state = v
		case "node":
			in.node = v
		case "ip":
			in.ip = v
		case "health":
			in.health = v
		}
		out[parts[2]] = in
	}
	return out
}

// pending counts the instances in state pending.
func (c *cluster) pending() int {
	n := 0
	for _, in := range c.instances() {
		if in.state == "pending" {
			n++
		}
	}
	return n
}

// live are the instances placed on a node that is not unreachable and running.
func (c *cluster) running() []instance {
	var out []instance
	for _, in := range c.instances() {
		if in.placed != "" && in.state == "running" && c.get(facts.NodeState(in.placed)) != `"unreachable"` {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// watchEndpoints records the fewest endpoints seen from now until stop.
// least fails the test if no sample was ever read, so that a broken sampler
// cannot pass for "never fewer than N".
func (c *cluster) watchEndpoints() (least func() int, stop func()) {
	var mu sync.Mutex
	min, samples := 1<<30, 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			fs, _, err := c.store.List(context.Background(), "endpoint/", 0)
			if err == nil {
				mu.Lock()
				min = minInt(min, len(fs))
				samples++
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	least = func() int {
		mu.Lock()
		defer mu.Unlock()
		if samples == 0 {
			c.t.Fatal("the endpoint sampler read nothing")
		}
		return min
	}
	return least, func() { close(done); wg.Wait() }
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

var hex5 = regexp.MustCompile(`^[0-9a-f]{5}$`)

func TestSeedWorkedExamplesEndToEnd(t *testing.T) {
	c := newCluster(t)
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		c.agent(n, "--node-id", n)
	}
	c.waitFor(20*time.Second, "three nodes hold leases", func() bool { return len(c.list("lease/node/")) == 3 })

	// 1. Service lifecycle: exactly the seed's keys and values.
	if r := c.srv.ccattler(t, "apply", "-f", "../../examples/web.hcl"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	c.waitFor(20*time.Second, "three endpoints", func() bool { return len(c.list("endpoint/service/web/")) == 3 })
	if v := c.get("effective/service/web/instances"); v != "3" {
		t.Errorf("effective = %q, want 3", v)
	}
	ins := c.instances()
	if len(ins) != 3 {
		t.Fatalf("%d instances, want 3:\n%s", len(ins), c.dump())
	}
	nodes := map[string]string{}
	for id, in := range ins {
		if !hex5.MatchString(id) {
			t.Errorf("instance id %q is not 5 hex characters", id)
		}
		if in.service != "web" || in.state != "running" || in.health != "healthy" || in.node != in.placed {
			t.Errorf("instance %+v", in)
		}
		nodes[in.placed] = id
		want := fmt.Sprintf(`{"ip": "%s", "port": 8080}`, in.ip)
		if got := c.get(facts.Endpoint("web", id)); got != want {
			t.Errorf("endpoint of %s = %s, want %s", id, got, want)
		}
	}
	if len(nodes) != 3 || nodes["node-1"] == "" || nodes["node-2"] == "" || nodes["node-3"] == "" {
		t.Errorf("placements %v, want one instance on each of node-1, node-2, node-3", nodes)
	}
	// Steps 3 and 4 of the seed as the records tell them: each instance was
	// created pending, then placed.
	evs, _, _, err := audit.List(context.Background(), c.store, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	created, placed := map[string]bool{}, map[string]bool{}
	for _, ev := range evs {
		for _, w := range ev.Writes {
			if ev.Rule == "create_instances" && strings.HasSuffix(w.Key, "/state") && string(w.Value) == `"pending"` {
				created[strings.Split(w.Key, "/")[2]] = true
			}
			if ev.Rule == "schedule" && strings.HasPrefix(w.Key, "placement/instance/") {
				placed[strings.TrimPrefix(w.Key, "placement/instance/")] = true
			}
		}
	}
	for id := range ins {
		if !created[id] || !placed[id] {
			t.Errorf("instance %s: created pending %v, placed %v by the rules", id, created[id], placed[id])
		}
	}

	// 2. Node failure: node-2 is cut off; its lease expires.
	least, stopWatch := c.watchEndpoints()
	lost := nodes["node-2"]
	c.signal("node-2", syscall.SIGSTOP)
	c.waitFor(e2eLeaseTTL+e2eGrace+10*time.Second, "node-2 unreachable", func() bool {
		return c.get(facts.NodeState("node-2")) == `"unreachable"`
	})
	var replacement instance
	c.waitFor(15*time.Second, "a replacement running on node-1 or node-3, with its endpoint, and node-2's endpoint gone", func() bool {
		run := c.running()
		eps := c.list("endpoint/service/web/")
		if len(run) != 3 || len(eps) != 3 {
			return false
		}
		for _, in := range run {
			if _, old := ins[in.id]; !old {
				replacement = in
			}
		}
		_, stale := eps[facts.Endpoint("web", lost)]
		return replacement.id != "" && !stale && eps[facts.Endpoint("web", replacement.id)] != ""
	})
	if replacement.placed != "node-1" && replacement.placed != "node-3" {
		t.Errorf("replacement on %s, want node-1 or node-3", replacement.placed)
	}
	if c.get(facts.Placement(lost)) != `"node-2"` || c.get(facts.InstanceState(lost)) != `"running"` {
		t.Errorf("node-2's instance %s lost its placement or facts: they must stay", lost)
	}

	// 3. Heal: node-2 returns with its old instance still running.
	c.signal("node-2", syscall.SIGCONT)
	// Settled means exactly three placements too: while the heal is being
	// sorted out the rules may create a fourth instance and stop one again
	// (seen under load); the mass loss below must start from the settled
	// state, or that instance's placement reads as a move.
	c.waitFor(e2eLeaseTTL+15*time.Second, "node-2 alive again and exactly three live instances, the replacement stopped", func() bool {
		if c.get(facts.NodeState("node-2")) != `"alive"` {
			return false
		}
		run := c.running()
		return len(run) == 3 && c.get(facts.Placement(replacement.id)) == "" && len(c.list("endpoint/service/web/")) == 3 &&
			len(c.list("placement/instance/")) == 3 && c.pending() == 0
	})
	if c.get(facts.Placement(lost)) != `"node-2"` {
		t.Errorf("the longest-running instance %s on node-2 was stopped; the newest (%s) should have been", lost, replacement.id)
	}
	stopWatch()
	if n := least(); n < 2 {
		t.Errorf("at some moment only %d endpoints existed, want at least 2 throughout", n)
	}

	// 4. Mass loss: every node is cut off together.
	before := c.list("placement/")
	nInstances := len(c.instances())
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		c.signal(n, syscall.SIGSTOP)
	}
	c.waitFor(e2eLeaseTTL+10*time.Second, "the disruption recorded", func() bool {
		return c.get(facts.ClusterDisruption()) != ""
	})
	time.Sleep(e2eGrace + 2*time.Second) // past the grace period: give the rules every chance to do harm
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		if st := c.get(facts.NodeState(n)); st != `"alive"` {
			t.Errorf("%s is %s during a mass loss, want it left alive", n, st)
		}
	}
	if n := len(c.instances()); n != nInstances {
		t.Errorf("%d instances during the mass loss, %d before: something was replaced", n, nInstances)
	}
	why, _, _, err := audit.List(context.Background(), c.store, audit.Filter{Rule: "detect_disruption"})
	if err != nil || len(why) == 0 {
		t.Errorf("no event says why nothing was replaced (%v)", err)
	}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		c.signal(n, syscall.SIGCONT)
	}
	c.waitFor(e2eLeaseTTL+15*time.Second, "leases back and the disruption over", func() bool {
		return len(c.list("lease/node/")) == 3 && c.get(facts.ClusterDisruption()) == ""
	})
	if after := c.list("placement/"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("placements moved during the mass loss:\nbefore %v\nafter  %v", before, after)
	}
}

func TestCapacityAndScaleEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "4", "--node-prefix", "n-", "--cpu", "2")
	c.waitFor(20*time.Second, "four nodes hold leases", func() bool { return len(c.list("lease/node/")) == 4 })
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// 5. Capacity: 10 instances of 1 cpu on 4 nodes of 2 cpu.
	batch := write("batch.hcl", `service "batch" {
  image     = "busybox:1.36"
  instances = 10
  resources {
    cpu    = 1
    memory = "64Mi"
  }
}
`)
	if r := c.srv.ccattler(t, "apply", "-f", batch); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	var pending []string
	c.waitFor(20*time.Second, "8 placed and running, 2 pending", func() bool {
		pending = pending[:0]
		placed := 0
		for _, in := range c.instances() {
			switch {
			case in.placed != "" && in.state == "running":
				placed++
			case in.placed == "" && in.state == "pending":
				pending = append(pending, in.id)
			}
		}
		return placed == 8 && len(pending) == 2
	})
	for _, id := range pending {
		var r result
		c.waitFor(10*time.Second, "a rejection recorded for "+id, func() bool {
			r = c.srv.ccattler(t, "why-not", "instance", id)
			return r.code == 0
		})
		for _, n := range []string{"n-0001", "n-0002", "n-0003", "n-0004"} {
			if !regexp.MustCompile(n + `\s+rejected by cpu\b`).MatchString(r.stdout) {
				t.Errorf("why-not instance %s does not say cpu rejected %s:\n%s", id, n, r.stdout)
			}
		}
	}

	// 6. Scale 3 -> 1 -> 5: endpoints follow.
	for _, n := range []int{3, 1, 5} {
		web := write("web.hcl", fmt.Sprintf(`service "web" {
  image     = "nginx:1.28"
  instances = %d
  expose    = [8080]
}
`, n))
		if r := c.srv.ccattler(t, "apply", "-f", web); r.code != 0 {
			t.Fatalf("apply %d: %s", n, r.stderr)
		}
		c.waitFor(20*time.Second, fmt.Sprintf("%d endpoints of web", n), func() bool {
			return len(c.list("endpoint/service/web/")) == n
		})
	}
}
