package faults

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/facts/pki"
)

var (
	long = flag.Bool("long", false, "run the fault scenarios at full length and size")
	keep = flag.Bool("keep", false, "keep every run's directory (logs, data, history), passing or not")
)

var bin string // the ccattler binary, built once

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "ccattler-faults-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "ccattler")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	build := exec.Command(gobin, "build", "-o", bin, "../cmd/ccattler")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ccattler:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// statSources stats, once, every file the ccattler binary is built from
// (the module's sources, embedded policies and console included; tests
// and testdata aside). The binary is built by another process, whose reads
// go test does not see: it caches a passing run by the files this one
// touched while its tests ran (not in TestMain: that is before it
// listens), and without these a change to the agent or the engine left
// the fault suite's last result standing.
func statSources(t *testing.T) {
	sourcesOnce.Do(func() { sourcesErr = walkSources("..") })
	if sourcesErr != nil {
		t.Fatalf("list the sources the binary is built from: %v", sourcesErr)
	}
}

var (
	sourcesOnce sync.Once
	sourcesErr  error
)

func walkSources(root string) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "testdata", "docs":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		_, err = os.Stat(path)
		return err
	})
}

// scale picks the CI size or, with -long, the full one.
func scale[T any](ci, full T) T {
	if *long {
		return full
	}
	return ci
}

// proc is one process of the run: a server or an agent.
type proc struct {
	name  string
	args  []string
	log   string // its stderr, appended across restarts
	netns string // the network namespace it runs in (netns_test.go); "" for the root one
	cmd   *exec.Cmd
	done  chan struct{}
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	statSources(t)
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "==== start %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	p.cmd = exec.Command(bin, p.args...)
	if p.netns != "" {
		// ip execs the binary in the namespace: the pid is the binary's,
		// so signals reach it.
		p.cmd = exec.Command("ip", append([]string{"netns", "exec", p.netns, bin}, p.args...)...)
	}
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), "CCATTLER_ETCD=")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); f.Close(); close(done) }(p.cmd, p.done)
}

func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a frozen process dies too
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop interrupts the process like Ctrl-C, killing it after a while.
func (p *proc) stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.kill()
	}
}

func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// member is a server of the cluster: its etcd member and its engine.
type member struct {
	proc
	id     string // --name: member and engine identity
	client string // client URL
	pki    string // its copy of the cluster's CA and its certificates
	admin  string // host:port of its /metrics; "" without withAdmin
}

// cluster is three secure servers on loopback forming one etcd cluster,
// and the simulated agents that run against it.
type cluster struct {
	t       *testing.T
	dir     string
	members []*member
	agents  []*proc
	root    *facts.Store // the test's own client, as root, over every endpoint
	tls     *tls.Config  // root's
	admin   bool         // servers serve /metrics (withAdmin)
	resync  string       // the servers' --resync-every (withResync); "": the default
}

// newCluster starts three servers with --initial-cluster, sharing one CA
// (each server its own copy, as on separate machines), and waits until
// they serve with one engine leading. The run's directory is removed when
// the test passes and kept, and named, when it fails.
func newCluster(t *testing.T, opts ...clusterOption) *cluster {
	t.Helper()
	return newClusterOn(t, nil, opts...)
}

// clusterOption changes how newCluster sets the servers up.
type clusterOption func(*cluster)

// withAdmin gives every server an admin endpoint (/metrics) on a free
// loopback port: tests that read the engine's counters need one; the
// others run without, as the console it serves costs a little on every
// change.
func withAdmin() clusterOption { return func(c *cluster) { c.admin = true } }

// withResync has the servers' engines resync at rest every d rather than
// every 10 minutes, so that a test as short as the suite's can count what
// the resyncs find (cluster.resyncs).
func withResync(d time.Duration) clusterOption { return func(c *cluster) { c.resync = d.String() } }

// newClusterOn is newCluster with each server in its own network
// namespace, bridged to the others and to the root namespace by net
// (netns_test.go); links[i] cuts server i off. A nil net: all in the root
// namespace.
func newClusterOn(t *testing.T, net *isolation, opts ...clusterOption) *cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "ccattler-faults-"+t.Name()+"-")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir}
	for _, o := range opts {
		o(c)
	}
	t.Cleanup(func() {
		for _, a := range c.agents {
			a.stop()
		}
		for _, m := range c.members {
			m.stop()
		}
		if c.root != nil {
			c.root.Close()
		}
		if t.Failed() || *keep {
			t.Logf("the run's logs, data and history are kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	ca := filepath.Join(dir, "ca")
	c.run(nil, "certs", "init", "--dir", ca)
	var peers []string
	ports := make([][2]int, 3)
	for i := range 3 {
		ports[i] = [2]int{etcdtest.FreePort(t), etcdtest.FreePort(t)}
		peers = append(peers, fmt.Sprintf("s%d=https://127.0.0.1:%d", i+1, ports[i][1]))
	}
	for i := range 3 {
		m := c.newMember(fmt.Sprintf("s%d", i+1), ports[i], strings.Join(peers, ","), "new")
		c.members = append(c.members, m)
	}
	if net != nil {
		net.isolate(c.members, ports)
	}
	for _, m := range c.members { // together: the first waits for a quorum
		m.start(t)
	}
	for _, m := range c.members {
		c.waitReady(m, 0)
	}
	tlsCfg, err := pki.ClientTLS(filepath.Join(c.members[0].pki, pki.CACertFile),
		filepath.Join(c.members[0].pki, "root.crt"), filepath.Join(c.members[0].pki, "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	c.tls = tlsCfg
	c.redial()
	c.engineLeader(30 * time.Second)
	return c
}

// redial gives the test a new root client over every endpoint. After all
// servers were down, the old one's connections wait out gRPC's reconnect
// backoff (it grows to minutes), which would be measured as the cluster's.
func (c *cluster) redial() {
	c.t.Helper()
	if c.root != nil {
		c.root.Close()
	}
	var err error
	c.root, err = facts.Dial(context.Background(), facts.StoreConfig{Endpoints: c.endpoints(), TLS: c.tls, Schema: facts.NewSchema()})
	if err != nil {
		c.t.Fatal(err)
	}
}

// newMember prepares (does not start) the server of member id on ports
// (client, peer), with its own copy of the cluster's CA.
func (c *cluster) newMember(id string, ports [2]int, initialCluster, state string) *member {
	t := c.t
	t.Helper()
	mdir := filepath.Join(c.dir, id)
	m := &member{id: id, client: fmt.Sprintf("https://127.0.0.1:%d", ports[0]), pki: filepath.Join(mdir, "pki")}
	if err := os.MkdirAll(m.pki, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{pki.CACertFile, pki.CAKeyFile} {
		b, err := os.ReadFile(filepath.Join(c.dir, "ca", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.pki, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if c.admin {
		m.admin = fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	}
	m.proc = proc{name: id, log: filepath.Join(mdir, "server.log"), args: []string{"server",
		"--name", id, "--data-dir", filepath.Join(mdir, "data"), "--ca-dir", m.pki,
		"--listen-client", m.client, "--listen-peer", fmt.Sprintf("https://127.0.0.1:%d", ports[1]),
		"--initial-cluster", initialCluster, "--initial-cluster-state", state, "--admin-addr", m.admin}}
	if c.resync != "" {
		m.proc.args = append(m.proc.args, "--resync-every", c.resync)
	}
	return m
}

// allRunning fails the test for every server that exited on its own: a
// server must outlive the faults of the others.
func (c *cluster) allRunning() {
	c.t.Helper()
	for _, m := range c.members {
		if !m.running() {
			c.t.Errorf("server %s exited:\n%s", m.id, tail(m.logText()))
		}
	}
	for _, a := range c.agents {
		if !a.running() {
			c.t.Errorf("agent %s exited:\n%s", a.name, tail(a.logText()))
		}
	}
}

// endpoints are every member's client URL, as clients and agents take them.
func (c *cluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.client)
	}
	return out
}

// waitReady waits until m's log says "server ready" for the (n+1)th time.
func (c *cluster) waitReady(m *member, n int) {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for strings.Count(m.logText(), `msg="server ready"`) <= n {
		if !m.running() {
			c.t.Fatalf("server %s exited before it was ready:\n%s", m.id, tail(m.logText()))
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("server %s not ready within 90s:\n%s", m.id, tail(m.logText()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restart starts a killed member again with the same arguments: its data
// dir holds the cluster, so --initial-cluster is not read again.
func (c *cluster) restart(ms ...*member) {
	c.t.Helper()
	ready := map[*member]int{}
	for _, m := range ms {
		ready[m] = strings.Count(m.logText(), `msg="server ready"`)
		m.start(c.t)
	}
	for _, m := range ms {
		c.waitReady(m, ready[m])
	}
}

// logLine is one line of a server's log (slog's text format).
type logLine struct {
	at         time.Time
	level, msg string
}

// logLines are the lines p logged from since to until.
func (p *proc) logLines(since, until time.Time) []logLine {
	var out []logLine
	for _, l := range strings.Split(p.logText(), "\n") {
		stamp, rest, ok := strings.Cut(strings.TrimPrefix(l, "time="), " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil || at.Before(since) || at.After(until) {
			continue
		}
		level, rest, _ := strings.Cut(strings.TrimPrefix(rest, "level="), " ")
		msg := strings.TrimPrefix(rest, "msg=")
		if q, err := strconv.QuotedPrefix(msg); err == nil {
			msg, _ = strconv.Unquote(q)
		} else {
			msg, _, _ = strings.Cut(msg, " ")
		}
		out = append(out, logLine{at: at, level: level, msg: msg})
	}
	return out
}

func tail(s string) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// result is one run of the binary as a client.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// client runs the binary as user:admin against every endpoint.
func (c *cluster) client(args ...string) result {
	return c.run(append([]string{"--etcd", strings.Join(c.endpoints(), ","), "--tls-dir", c.members[0].pki}, args...))
}

// run runs the binary; a nil prefix: args as they are.
func (c *cluster) run(prefix []string, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(prefix, args...)...)
	cmd.Env = append(os.Environ(), "CCATTLER_ETCD=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			c.t.Fatalf("ccattler %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// must runs a client command and fails the test unless it exits 0.
func (c *cluster) must(args ...string) string {
	c.t.Helper()
	r := c.client(args...)
	if r.code != 0 {
		c.t.Fatalf("ccattler %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// startAgents runs procs simulated-agent processes of nodes nodes each,
// as node:{prefix}* principals admitted first.
func (c *cluster) startAgents(procs, nodes int) {
	c.t.Helper()
	for i := range procs {
		c.startAgent(fmt.Sprintf("sim%c-", 'a'+i), nodes, nil)
	}
	c.waitNodes(procs * nodes)
}

// startAgent runs one simulated-agent process of nodes nodes named
// {prefix}0001..., as node:{prefix}*, in network namespace ns (nil: the
// root one), and returns it once it runs.
func (c *cluster) startAgent(prefix string, nodes int, ns *netns) *proc {
	c.t.Helper()
	principal := "node:" + prefix + "*"
	c.run(nil, "certs", "issue", "--dir", c.members[0].pki, "--name", principal)
	if r := c.client("auth", "add", principal); r.code != 0 && !strings.Contains(r.stderr, "has rules already") {
		c.t.Fatalf("auth add %s: %s", principal, r.stderr)
	}
	a := &proc{name: "agent-" + prefix, log: filepath.Join(c.dir, "agent-"+prefix+".log"), args: []string{"agent",
		"--etcd", strings.Join(c.endpoints(), ","), "--tls-dir", c.members[0].pki,
		"--runtime", "sim", "--nodes", fmt.Sprint(nodes), "--node-prefix", prefix,
		"--state-dir", filepath.Join(c.dir, "agent-"+prefix), "--sim-start-delay", "10ms",
		"--metrics-interval", "0", "--lease-ttl", "10s", "--cpu", "64", "--memory", "256Gi"}}
	if ns != nil {
		a.netns = ns.name
	}
	// The server syncs etcd's users from auth/ within about a second;
	// an agent started before that is refused and exits: start again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		a.start(c.t)
		time.Sleep(3 * time.Second)
		if a.running() {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("agent %s keeps exiting:\n%s", prefix, tail(a.logText()))
		}
	}
	c.agents = append(c.agents, a)
	return a
}

func (c *cluster) waitNodes(n int) {
	c.t.Helper()
	c.poll("nodes registered", 60*time.Second, func() (bool, string) {
		fs, _, err := c.root.List(context.Background(), "lease/node/", 0)
		if err != nil {
			return false, err.Error()
		}
		return len(fs) >= n, fmt.Sprintf("%d of %d node leases", len(fs), n)
	})
}

// poll calls check until it holds or within fails the test with its last
// word, and returns how long it took.
func (c *cluster) poll(what string, within time.Duration, check func() (bool, string)) time.Duration {
	c.t.Helper()
	start := time.Now()
	var last string
	for {
		ok, why := check()
		if ok {
			return time.Since(start)
		}
		last = why
		if time.Since(start) > within {
			c.t.Fatalf("%s: not within %s: %s", what, within, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// etcdLeader is the member etcd elected, asked of the members running.
func (c *cluster) etcdLeader() (*member, bool) {
	ids := map[uint64]*member{}
	var leader uint64
	for _, m := range c.members {
		if !m.running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := c.root.MemberStatus(ctx, m.client)
		cancel()
		if err != nil {
			continue
		}
		ids[st.ID] = m
		if st.Leader != 0 {
			leader = st.Leader
		}
	}
	m, ok := ids[leader]
	return m, ok
}

// engineLeader is the member whose engine holds the election, waiting up
// to within for there to be one.
func (c *cluster) engineLeader(within time.Duration) *member {
	c.t.Helper()
	var out *member
	c.poll("an engine leads", within, func() (bool, string) {
		id, err := c.electedEngine()
		if err != nil {
			return false, err.Error()
		}
		for _, m := range c.members {
			if m.id == id && m.running() {
				out = m
				return true, ""
			}
		}
		return false, "elected: " + id
	})
	return out
}

func (c *cluster) electedEngine() (string, error) {
	id, _, err := c.engineTerm()
	return id, err
}

// engineTerm is the engine the election names ("" for none) and the
// revision its term began at (its election key's create revision).
func (c *cluster) engineTerm() (string, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.root.Elected(ctx, "/ccattler-leader/")
}

// moveEtcdLeader makes m etcd's leader (etcd's move-leader, asked of the
// leader now).
func (c *cluster) moveEtcdLeader(m *member) {
	c.t.Helper()
	c.poll("etcd leadership moved to "+m.id, 30*time.Second, func() (bool, string) {
		cur, ok := c.etcdLeader()
		if ok && cur == m {
			return true, ""
		}
		if !ok {
			return false, "no leader"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := c.root.MemberStatus(ctx, m.client)
		if err != nil {
			return false, err.Error()
		}
		if err := c.root.MoveLeader(ctx, st.ID); err != nil {
			return false, err.Error()
		}
		return false, "moved"
	})
}

// world is what etcd holds about the instances at one revision.
type world struct {
	target    map[string]int            // service -> effective instances
	running   map[string]map[string]int // service -> running instance id -> 1
	states    map[string]string         // instance -> state
	startedAt map[string]string         // instance -> observed started_at
	endpoints map[string]map[string]bool
}

func (c *cluster) world() (*world, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := &world{target: map[string]int{}, running: map[string]map[string]int{}, states: map[string]string{},
		startedAt: map[string]string{}, endpoints: map[string]map[string]bool{}}
	fs, rev, err := c.root.List(ctx, "effective/service/", 0)
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(f.Key, "effective/service/"), "/instances"); ok && !strings.Contains(name, "/") {
			var n int
			_ = json.Unmarshal(f.Value, &n)
			w.target[name] = n
		}
	}
	obs, _, err := c.root.List(ctx, "observed/instance/", rev)
	if err != nil {
		return nil, err
	}
	service := map[string]string{}
	for _, f := range obs {
		rest := strings.TrimPrefix(f.Key, "observed/instance/")
		id, attr, _ := strings.Cut(rest, "/")
		var s string
		_ = json.Unmarshal(f.Value, &s)
		switch attr {
		case "service":
			service[id] = s
		case "state":
			w.states[id] = s
		case "started_at":
			w.startedAt[id] = s
		}
	}
	for id, st := range w.states {
		if st == "running" {
			if w.running[service[id]] == nil {
				w.running[service[id]] = map[string]int{}
			}
			w.running[service[id]][id] = 1
		}
	}
	eps, _, err := c.root.List(ctx, "endpoint/service/", rev)
	if err != nil {
		return nil, err
	}
	for _, f := range eps {
		name, id, ok := strings.Cut(strings.TrimPrefix(f.Key, "endpoint/service/"), "/")
		if !ok {
			continue
		}
		if w.endpoints[name] == nil {
			w.endpoints[name] = map[string]bool{}
		}
		w.endpoints[name][id] = true
	}
	return w, nil
}

// converged says whether every service runs exactly its target, each
// running instance has its endpoint and no endpoint is left for another.
func (w *world) converged(want map[string]int) (bool, string) {
	for s, n := range want {
		if w.target[s] != n {
			return false, fmt.Sprintf("service %s: effective instances %d, applied %d", s, w.target[s], n)
		}
		if len(w.running[s]) != n {
			return false, fmt.Sprintf("service %s: %d running of %d", s, len(w.running[s]), n)
		}
		for id := range w.running[s] {
			if !w.endpoints[s][id] {
				return false, fmt.Sprintf("service %s: running instance %s has no endpoint", s, id)
			}
		}
		for id := range w.endpoints[s] {
			if w.running[s][id] == 0 {
				return false, fmt.Sprintf("service %s: endpoint of %s, which is not running (%s)", s, id, w.states[id])
			}
		}
	}
	return true, ""
}

// runningIDs are the running instances of every service, sorted.
func (w *world) runningIDs() []string {
	var out []string
	for _, ids := range w.running {
		for id := range ids {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// waitConverged waits until the world is converged and returns it.
func (c *cluster) waitConverged(services map[string]int, within time.Duration) (*world, time.Duration) {
	c.t.Helper()
	var w *world
	took := c.poll("converged", within, func() (bool, string) {
		var err error
		if w, err = c.world(); err != nil {
			return false, err.Error()
		}
		return w.converged(services)
	})
	return w, took
}

// applyServices writes a file of services prefix-0..prefix-(n-1) with
// instances each, applies it and records them in want.
func (c *cluster) applyServices(want map[string]int, prefix string, n, instances int) {
	c.t.Helper()
	var b strings.Builder
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		want[name] = instances
		fmt.Fprintf(&b, "service %q {\n  image = \"nginx\"\n  instances = %d\n  expose = [8080]\n  resources { cpu = 0.01  memory = \"1Mi\" }\n}\n", name, instances)
	}
	p := filepath.Join(c.dir, prefix+".hcl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.must("apply", "-f", p)
}
