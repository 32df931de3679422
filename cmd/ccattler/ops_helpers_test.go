package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts/etcdtest"
)

// Helpers of the operator and auditor tests: a server running the engine,
// simulated nodes, and waits on what they converge to.

// newEngineServer starts a server that runs the rules engine, on free ports
// (its admin endpoint too), with extra flags such as --policies DIR.
func newEngineServer(t *testing.T, args ...string) (*server, string) {
	t.Helper()
	admin := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	return startServer(t, append([]string{"--data-dir", t.TempDir(),
		"--listen-client", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--admin-addr", admin, "--engine-id", "server-1"}, args...)...), admin
}

// startSimNodes runs `ccattler agent --runtime sim` with n nodes named
// prefix0001... against the server until the end of the test.
func startSimNodes(t *testing.T, srv *server, n int, prefix string) {
	t.Helper()
	cmd := exec.Command(bin, append(srv.agentFlags(t, "node:"+prefix+"*"), "agent", "--runtime", "sim", "--nodes", fmt.Sprint(n),
		"--node-prefix", prefix, "--state-dir", t.TempDir(), "--lease-ttl", "5s", "--cpu", "8", "--memory", "16Gi",
		"--sim-start-delay", "20ms")...)
	var mu sync.Mutex
	var log strings.Builder
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			mu.Lock()
			t.Errorf("agent did not stop within 15s of SIGINT:\n%s", log.String())
			mu.Unlock()
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("agent %s*:\n%.20000s", prefix, log.String())
			mu.Unlock()
		}
	})
	// Every node holds its lease and reports itself alive with its
	// capacity before the test schedules anything: placements depend on it.
	waitUntil(t, 30*time.Second, fmt.Sprintf("%d nodes alive", n), func() bool {
		leases, _, _ := srv.factsUnder(t, "lease/node/")
		nodes, _, _ := srv.factsUnder(t, "observed/node/")
		alive := 0
		for k, v := range nodes {
			if strings.HasSuffix(k, "/state") && v == `"alive"` && nodes[strings.TrimSuffix(k, "state")+"capacity/cpu"] != "" {
				alive++
			}
		}
		return len(leases) == n && alive == n
	})
}

// waitUntil polls cond every 50ms until it holds, failing the test after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fleet is what the facts say about a service's instances.
type fleet struct {
	state     map[string]string // instance -> state
	placement map[string]string // instance -> node
	placedAt  map[string]int64  // instance -> ModRevision of its placement
}

func readFleet(t *testing.T, srv *server, service string) fleet {
	t.Helper()
	obs, _, _ := srv.factsUnder(t, "observed/instance/")
	pl, revs, _ := srv.factsUnder(t, "placement/instance/")
	f := fleet{state: map[string]string{}, placement: map[string]string{}, placedAt: map[string]int64{}}
	for k, v := range obs {
		id, ok := strings.CutSuffix(strings.TrimPrefix(k, "observed/instance/"), "/service")
		if !ok || v != fmt.Sprintf("%q", service) {
			continue
		}
		f.state[id] = strings.Trim(obs["observed/instance/"+id+"/state"], `"`)
		if node, ok := pl["placement/instance/"+id]; ok {
			f.placement[id] = strings.Trim(node, `"`)
			f.placedAt[id] = revs["placement/instance/"+id]
		}
	}
	return f
}

func (f fleet) running() int {
	n := 0
	for id, s := range f.state {
		if s == "running" && f.placement[id] != "" {
			n++
		}
	}
	return n
}

// waitFleet waits until the service has exactly n instances, all running.
func waitFleet(t *testing.T, srv *server, service string, n int) fleet {
	t.Helper()
	var f fleet
	waitUntil(t, 60*time.Second, fmt.Sprintf("%d running instances of %s", n, service), func() bool {
		f = readFleet(t, srv, service)
		return len(f.state) == n && f.running() == n
	})
	return f
}

// serviceFile writes a service with n instances of 0.5 cpu and 512Mi.
func serviceFile(t *testing.T, dir, name string, n int) string {
	t.Helper()
	return writeFile(t, dir, name+".hcl", fmt.Sprintf("service %q {\n  image     = \"nginx:1.28\"\n  instances = %d\n"+
		"  resources { cpu = 0.5  memory = \"512Mi\" }\n}\n", name, n))
}

// policyCopy copies the default policies into a new directory, applying
// edit to each file's text.
func policyCopy(t *testing.T, edit func(name, src string) string) string {
	t.Helper()
	dir := t.TempDir()
	names, err := filepath.Glob("../../policies/*.hcl")
	if err != nil || len(names) == 0 {
		t.Fatalf("no default policies: %v", err)
	}
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		if edit != nil {
			src = edit(filepath.Base(n), src)
		}
		writeFile(t, dir, filepath.Base(n), src)
	}
	return dir
}

var scoreLine = regexp.MustCompile(`(?m)^(\s*)score\s*=\s*".*"\s*$`)

// packing turns the default spread scheduler into one that packs: the
// most allocated node that fits wins.
func packing(name, src string) string {
	if name != "scheduler.hcl" {
		return src
	}
	return scoreLine.ReplaceAllString(src,
		`${1}score = "(cap_cpu > 0.0 ? used_cpu / cap_cpu : 0.0) + (cap_mem > 0 ? double(used_mem) / double(cap_mem) : 0.0)"`)
}

var whenLine = regexp.MustCompile(`(?m)^(\s*)when(\s*)=(\s*)"`)

// paused keeps the scheduler's rule (others are ordered after it) but
// makes its guard always false: pending instances stay unplaced.
func paused(name, src string) string {
	if name != "scheduler.hcl" {
		return src
	}
	return whenLine.ReplaceAllString(src, `${1}when${2}=${3}"false && `)
}

// writesDuring runs fn and returns every key written in etcd meanwhile
// (the server's clock and the agents' periodic metric reports aside), read
// from a watch over the whole keyspace.
func writesDuring(t *testing.T, srv *server, fn func()) []string {
	t.Helper()
	st := srv.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fn()
	after, err := st.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := etcdtest.WritesBetween(ctx, st, before, after)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range all {
		periodic := k == "/ccattler/observed/clock" ||
			(strings.HasPrefix(k, "/ccattler/observed/service/") && strings.Contains(k, "/metrics/"))
		if !periodic {
			keys = append(keys, k)
		}
	}
	return keys
}

// statusJSON reads `rules status -o json` of the only server.
func statusJSON(t *testing.T, srv *server) map[string]any {
	t.Helper()
	var sts []map[string]any
	out := srv.ok(t, "rules", "status", "-o", "json")
	if err := json.Unmarshal([]byte(out), &sts); err != nil || len(sts) != 1 {
		t.Fatalf("rules status -o json: %v\n%s", err, out)
	}
	return sts[0]
}

// versionOf is the version `rules check` gives a directory.
func versionOf(t *testing.T, dir string) string {
	t.Helper()
	r := run(t, "rules", "check", dir, "-o", "json")
	var v struct{ Version string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.Version == "" {
		t.Fatalf("rules check %s: exit %d\n%s%s", dir, r.code, r.stdout, r.stderr)
	}
	return v.Version
}
