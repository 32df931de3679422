package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// The commands of a deploy workflow (validate, diff, apply --wait, scale,
// rollback) and of the client configuration, through the real binary.

// runEnv runs the binary with env (KEY=VALUE) replacing those variables of
// the test's environment.
func runEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runWith(t, withEnv(env), 90*time.Second, args...)
}

// withEnv is the test's environment without any CCATTLER_ variable, with env added.
func withEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CCATTLER_") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") && !strings.HasPrefix(kv, "HOME=") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

func mustExit(t *testing.T, r result, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
}

// TestServiceWorkflow: validate works with no etcd; diff shows what an apply
// and then the rules would do and writes nothing; apply --wait returns only
// once every endpoint exists in etcd; scale and rollback change the count
// and go back, recorded in the service's history; a service that cannot
// converge makes --wait exit 1 naming it; nodes cannot forge the history.
func TestServiceWorkflow(t *testing.T) {
	dir := t.TempDir()
	web := writeFile(t, dir, "web.hcl", "service \"web\" {\n  image     = \"nginx:1.28\"\n  instances = 2\n  expose    = [8080]\n"+
		"  resources {\n    cpu    = 0.5\n    memory = \"256Mi\"\n  }\n}\n")
	bad := writeFile(t, dir, "bad.hcl", "service \"web\" {\n  image     = \"nginx:1.28\"\n  instances = \"two\"\n}\n")

	t.Run("validate offline", func(t *testing.T) {
		dead := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
		r := run(t, "--etcd", dead, "validate", "-f", web)
		mustExit(t, r, 0, "validate web.hcl")
		if !strings.Contains(r.stdout, "valid: 1 service (web)") {
			t.Errorf("validate output: %s", r.stdout)
		}
		r = run(t, "--etcd", dead, "validate", "-f", bad)
		mustExit(t, r, 1, "validate bad.hcl")
		if !strings.Contains(r.stderr, bad+":3:") || !strings.Contains(r.stderr, "instances") {
			t.Errorf("validate does not name bad.hcl:3:col and the attribute:\n%s", r.stderr)
		}
		mustExit(t, run(t, "validate"), 2, "validate with no -f")
		mustExit(t, run(t, "validate", "-f", filepath.Join(dir, "missing.hcl")), 1, "validate a missing file")
	})

	srv, _ := newEngineServer(t)
	startSimNodes(t, srv, 2, "wf-")
	st := srv.dial(t)
	ctx := context.Background()
	waitUntil(t, 60*time.Second, "two nodes leased", func() bool {
		fs, _, err := st.List(ctx, "lease/node/", 0)
		return err == nil && len(fs) == 2
	})
	endpoints := func() int {
		fs, _, err := st.List(ctx, "endpoint/service/web/", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(fs)
	}

	t.Run("diff writes nothing and shows the rules' plan", func(t *testing.T) {
		r := srv.ccattler(t, "diff", "-f", web)
		mustExit(t, r, 0, "diff")
		for _, want := range []string{"+ desired/service/web/image = \"nginx:1.28\"", "create_instances", "schedule",
			"+ effective/service/web/instances = 2", "Plan: 2 instances created, 0 stopped, 2 placements"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("diff output lacks %q:\n%s", want, r.stdout)
			}
		}
		var out struct {
			Summary planSummary `json:"summary"`
			Written bool        `json:"written"`
		}
		if err := json.Unmarshal([]byte(srv.ok(t, "diff", "-f", web, "-o", "json")), &out); err != nil || out.Summary.Created != 2 || out.Summary.Placements != 2 || out.Written {
			t.Errorf("diff -o json: %+v, err %v", out, err)
		}
		// rules plan --with is the same plan.
		if r := srv.ok(t, "rules", "plan", "--with", web); !strings.Contains(r, "Plan: 2 instances created, 0 stopped, 2 placements") {
			t.Errorf("rules plan --with:\n%s", r)
		}
		// The server's clock ticks meanwhile: what must be absent is the
		// apply's and the rules' writes.
		if vals, _, _ := srv.factsUnder(t, "desired/", "intent/", "effective/", "observed/instance/", "placement/"); len(vals) != 0 {
			t.Errorf("diff wrote: %v", vals)
		}
		mustExit(t, srv.ccattler(t, "diff", "-f", bad), 1, "diff bad.hcl")
		mustExit(t, srv.ccattler(t, "diff"), 2, "diff with no -f")
	})

	t.Run("diff lists ten keys of a rule and counts the rest unless --all", func(t *testing.T) {
		many := writeFile(t, dir, "many.hcl", "service \"many\" {\n  image     = \"nginx:1.28\"\n  instances = 25\n}\n")
		r := srv.ok(t, "diff", "-f", many)
		sched := r[strings.Index(r, "\nschedule\n"):]
		sched = sched[:strings.Index(sched[1:], "\n\n")+1]
		if n := strings.Count(sched, "  + placement/instance/"); n != 10 {
			t.Errorf("schedule lists %d placements, want the first 10:\n%s", n, sched)
		}
		if !strings.Contains(sched, "… and 40 more (--all lists them): 25 × + placement/node/{node-id}/{instance-id}, 15 × + placement/instance/{instance-id}") {
			t.Errorf("schedule does not count the other 15 placements and the 25 entries by node:\n%s", sched)
		}
		if !strings.Contains(r, "Plan: 25 instances created, 0 stopped, 25 placements") {
			t.Errorf("diff's summary:\n%s", r)
		}
		r = srv.ok(t, "diff", "-f", many, "--all")
		if n := strings.Count(r, "  + placement/instance/"); n != 25 || strings.Contains(r, "more (--all lists them)") {
			t.Errorf("diff --all lists %d placements, want 25:\n%s", n, r)
		}
	})

	t.Run("apply --wait returns once every endpoint exists", func(t *testing.T) {
		r := srv.ccattler(t, "apply", "-f", web, "--wait", "--timeout", "60s")
		mustExit(t, r, 0, "apply --wait")
		if n := endpoints(); n != 2 { // read right after the command: no polling
			t.Fatalf("apply --wait returned with %d endpoints in etcd, want 2\nstderr:\n%s", n, r.stderr)
		}
		if !strings.Contains(r.stderr, "web: 2/2 running, 2 healthy, 2 endpoints") || !strings.Contains(r.stderr, "converged: web") {
			t.Errorf("no progress on stderr:\n%s", r.stderr)
		}
		if strings.Contains(r.stdout, "converged") {
			t.Errorf("progress on stdout:\n%s", r.stdout)
		}
	})

	t.Run("scale and rollback", func(t *testing.T) {
		r := srv.ccattler(t, "scale", "service", "web", "3", "--wait", "--timeout", "60s")
		mustExit(t, r, 0, "scale --wait")
		if n := endpoints(); n != 3 {
			t.Fatalf("scale --wait returned with %d endpoints, want 3", n)
		}
		hist := srv.ok(t, "rollback", "service", "web", "--list")
		if strings.Count(hist, "nginx:1.28") != 2 || !regexp.MustCompile(`(?m)^\*\s+\S+\s+nginx:1\.28\s+3$`).MatchString(hist) {
			t.Errorf("history after apply and scale:\n%s", hist)
		}
		r = srv.ccattler(t, "rollback", "service", "web", "--wait", "--timeout", "60s")
		mustExit(t, r, 0, "rollback --wait")
		vals, _, _ := srv.factsUnder(t, "desired/service/web/instances", "intent/user/service/web/")
		if vals["desired/service/web/instances"] != "2" || vals["intent/user/service/web/instances"] != "2" {
			t.Errorf("after rollback: %v, want 2 and 2", vals)
		}
		if n := endpoints(); n != 2 {
			t.Errorf("rollback --wait returned with %d endpoints, want 2", n)
		}
		// A second rollback undoes the first.
		srv.ok(t, "rollback", "service", "web")
		if vals, _, _ := srv.factsUnder(t, "desired/service/web/instances"); vals["desired/service/web/instances"] != "3" {
			t.Errorf("second rollback: instances %v, want 3", vals)
		}
		for _, args := range [][]string{{"scale", "service", "web"}, {"scale", "service", "web", "--", "-1"}, {"scale", "service", "web", "x"},
			{"scale", "node", "web", "2"}, {"scale", "service", "Bad_Name", "2"}, {"rollback", "service"}, {"rollback", "service", "web", "--to", "nope"}} {
			mustExit(t, srv.ccattler(t, args...), 2, strings.Join(args, " "))
		}
		r = srv.ccattler(t, "scale", "service", "nope", "2")
		mustExit(t, r, 1, "scale an unknown service")
		if !strings.Contains(r.stderr, "no such service") {
			t.Errorf("scale of an unknown service: %s", r.stderr)
		}
	})

	t.Run("a forged history entry is refused by key", func(t *testing.T) {
		key := facts.ServiceHistory("web", "20991231T000000.000000001Z-000001")
		forged := `{"event":"event/x","facts":{"desired/service/web":{},"auth/user:eve/rules":[{"prefix":"*","access":"readwrite"}]}}`
		if _, err := st.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(key, []byte(forged))}}); err != nil {
			t.Fatal(err)
		}
		_, _, rev := srv.factsUnder(t, "desired/service/web")
		r := srv.ccattler(t, "rollback", "service", "web")
		mustExit(t, r, 1, "rollback with a forged entry")
		if !strings.Contains(r.stderr, key) || !strings.Contains(r.stderr, "auth/user:eve/rules") {
			t.Errorf("refusal does not name the entry and the key:\n%s", r.stderr)
		}
		if vals, _, _ := srv.factsUnder(t, "auth/user:eve/"); len(vals) != 0 {
			t.Errorf("forged entry restored: %v", vals)
		}
		if _, revs, _ := srv.factsUnder(t, "desired/service/web"); maxRev(revs) > rev {
			t.Errorf("the service's facts changed after a refused rollback")
		}
		if _, err := st.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Delete(key)}}); err != nil {
			t.Fatal(err)
		}
		// A node may not write the history at all (it reads desired/service/ only).
		srv.admit(t, "node:wf-0001")
		node, err := srv.dialAs("node:wf-0001")
		if err != nil {
			t.Fatal(err)
		}
		defer node.Close()
		if _, err := node.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(key, []byte(`{"event":"x","facts":{}}`))}}); err == nil {
			t.Errorf("node:wf-0001 wrote %s", key)
		}
	})

	t.Run("a principal without the history's grant still applies", func(t *testing.T) {
		grants := writeFile(t, dir, "carol.json", `[{"prefix": "*", "access": "read"},
 {"key": "desired/service/carol", "access": "readwrite"}, {"prefix": "desired/service/carol/", "access": "readwrite"},
 {"prefix": "intent/user/service/carol/", "access": "readwrite"}, {"prefix": "event/", "access": "write"}]`)
		srv.ok(t, "auth", "add", "user:carol", "--rules", grants)
		srv.admit(t, "user:carol")
		carol := writeFile(t, dir, "carol.hcl", "service \"carol\" {\n  image = \"nginx:1.28\"\n  instances = 0\n}\n")
		r := srv.ccattler(t, "--identity", "user:carol", "apply", "-f", carol)
		mustExit(t, r, 0, "apply as user:carol")
		if !strings.Contains(r.stdout, "no history entry was written") {
			t.Errorf("no note of the missing history:\n%s", r.stdout)
		}
		if vals, _, _ := srv.factsUnder(t, "desired/service/carol", facts.ServiceHistory("carol", "")); vals["desired/service/carol/image"] != `"nginx:1.28"` || len(vals) != 3 {
			t.Errorf("after carol's apply: %v", vals)
		}
	})

	t.Run("apply --wait names what cannot converge", func(t *testing.T) {
		huge := writeFile(t, dir, "huge.hcl", "service \"huge\" {\n  image     = \"nginx:1.28\"\n  instances = 1\n  resources {\n    cpu = 64\n  }\n}\n")
		r := srv.ccattler(t, "apply", "-f", huge, "-f", web, "--wait", "--timeout", "4s")
		mustExit(t, r, 1, "apply --wait of a service no node fits")
		if !strings.Contains(r.stderr, "not converged within") || !strings.Contains(r.stderr, "huge: 0/1 running") {
			t.Errorf("the error does not name huge:\n%s", r.stderr)
		}
		if i := strings.LastIndex(r.stderr, "error:"); i >= 0 && strings.Contains(r.stderr[i:], "web:") {
			t.Errorf("the converged service web is named as not converged:\n%s", r.stderr[i:])
		}
		if r.took > 30*time.Second {
			t.Errorf("--timeout 4s took %s", r.took)
		}
	})
}

func maxRev(revs map[string]int64) int64 {
	var m int64
	for _, r := range revs {
		m = max(m, r)
	}
	return m
}

// TestClientConfig: a context holds the endpoints and certificates of a
// secure server, so commands need no flags; flags and environment variables
// win over it; a mistaken file or context name is a clear error.
func TestClientConfig(t *testing.T) {
	srv := newServer(t, t.TempDir())
	home := t.TempDir()
	xdg := filepath.Join(home, "xdg")
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + xdg}
	path := filepath.Join(xdg, "ccattler", "config.hcl")

	r := runEnv(t, env, "--etcd", srv.client, "--tls-dir", srv.tlsDir, "config", "set-context", "prod")
	mustExit(t, r, 0, "config set-context")
	if !strings.Contains(r.stdout, path) {
		t.Errorf("set-context does not name %s: %s", path, r.stdout)
	}
	mustExit(t, runEnv(t, env, "config", "current-context"), 1, "current-context with none")
	mustExit(t, runEnv(t, env, "config", "use-context", "nope"), 2, "use-context of an unknown context")
	mustExit(t, runEnv(t, env, "config", "use-context"), 2, "use-context with no name")
	mustExit(t, runEnv(t, env, "config", "use-context", "prod"), 0, "use-context prod")
	if r := runEnv(t, env, "config", "current-context"); r.code != 0 || strings.TrimSpace(r.stdout) != "prod" {
		t.Fatalf("current-context: %d %q", r.code, r.stdout)
	}

	// No flags: the context's endpoint and certificates.
	mustExit(t, runEnv(t, env, "get", "services"), 0, "get services through the context")
	// A flag wins over the context, and so does the environment.
	dead := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--etcd", dead, "--dial-timeout", "1s", "get", "services"}},
		{[]string{"CCATTLER_ETCD=" + dead}, []string{"--dial-timeout", "1s", "get", "services"}},
	} {
		r := runEnv(t, append(append([]string(nil), env...), c.env...), c.args...)
		if r.code != 1 || !strings.Contains(r.stderr, dead) || !strings.Contains(r.stderr, "did not answer") {
			t.Errorf("%v %v: exit %d, want 1 naming %s:\n%s", c.env, c.args, r.code, dead, r.stderr)
		}
	}

	// A second context, a relative tls_dir (relative to the file), chosen
	// with CCATTLER_CONTEXT or --context.
	rel, err := filepath.Rel(filepath.Dir(path), srv.tlsDir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Dir(path), "config.hcl", string(src)+fmt.Sprintf("\n# a hand-written one\ncontext \"rel\" {\n  etcd    = [%q]\n  tls_dir = %q\n}\n\ncontext \"dead\" {\n  etcd = [%q]\n}\n", srv.client, rel, dead))
	mustExit(t, runEnv(t, append(env, "CCATTLER_CONTEXT=rel"), "get", "nodes"), 0, "CCATTLER_CONTEXT=rel")
	mustExit(t, runEnv(t, env, "--context", "dead", "--dial-timeout", "1s", "get", "nodes"), 1, "--context dead")
	r = runEnv(t, append(env, "CCATTLER_CONTEXT=nope"), "get", "nodes")
	mustExit(t, r, 2, "CCATTLER_CONTEXT=nope")
	if !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(r.stderr, "dead, prod, rel") {
		t.Errorf("unknown context error does not list the known ones:\n%s", r.stderr)
	}
	r = runEnv(t, env, "config", "get-contexts")
	if r.code != 0 || !regexp.MustCompile(`(?m)^\*\s+prod\s`).MatchString(r.stdout) || !strings.Contains(r.stdout, "rel") {
		t.Errorf("get-contexts:\n%s%s", r.stdout, r.stderr)
	}
	// Editing keeps what it does not touch.
	mustExit(t, runEnv(t, env, "config", "use-context", "rel"), 0, "use-context rel")
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "# a hand-written one") {
		t.Errorf("use-context lost the file's comment:\n%s", b)
	}
	mustExit(t, runEnv(t, env, "config", "delete-context", "rel"), 0, "delete-context rel")
	mustExit(t, runEnv(t, env, "config", "current-context"), 1, "current-context after deleting it")

	// A mistaken file: every client command says where, and exits 1.
	writeFile(t, filepath.Dir(path), "config.hcl", "context \"x\" {\n  etcd = [\"http://127.0.0.1:1\"]\n  endpoint = \"oops\"\n}\n")
	r = runEnv(t, env, "get", "nodes")
	mustExit(t, r, 1, "a mistaken config file")
	if !strings.Contains(r.stderr, path+":3:") || !strings.Contains(r.stderr, "endpoint") {
		t.Errorf("the error does not name %s:3 and the attribute:\n%s", path, r.stderr)
	}
	// validate is offline and takes no context.
	mustExit(t, runEnv(t, env, "validate", "-f", webExample), 0, "validate with a broken config")
}

// binProc is a ccattler subprocess (dev, bench) whose stdout is kept line
// by line; it is killed at the test's end if still running.
type binProc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string     // guarded by mu
	stderr bytes.Buffer // guarded by mu (written by exec's copier; read after exit or under mu)
	exited chan struct{}
}

func startDev(t *testing.T, env []string, args ...string) *binProc {
	t.Helper()
	return startBin(t, env, append([]string{"dev"}, args...)...)
}

func startBin(t *testing.T, env []string, args ...string) *binProc {
	t.Helper()
	d := &binProc{exited: make(chan struct{})}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = withEnv(env)
	d.cmd.Stderr = &lockedWriter{mu: &d.mu, w: &d.stderr}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.mu.Lock()
			d.lines = append(d.lines, sc.Text())
			d.mu.Unlock()
		}
		_ = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("ccattler %s's output:\n%s", args[0], d.dump())
		}
	})
	return d
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (d *binProc) dump() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n") + "\nstderr:\n" + d.stderr.String()
}

// wait returns the submatches of the first line matching re, waiting up to 60s.
func (d *binProc) wait(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		d.mu.Lock()
		for _, l := range d.lines {
			if m := re.FindStringSubmatch(l); m != nil {
				d.mu.Unlock()
				return m
			}
		}
		d.mu.Unlock()
		select {
		case <-d.exited:
			t.Fatalf("%s exited before a line matching %s:\n%s", d.cmd.Args[1], re, d.dump())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %s within 60s:\n%s", re, d.dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *binProc) interrupt(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30s of SIGINT:\n%s", d.cmd.Args[1], d.dump())
	}
}

var devContextLine = regexp.MustCompile(`^ccattler dev: context (\S+) \(etcd (\S+)\) written to (\S+) and made current`)

// TestDevSideBySide: two devs started with no port flags run side by side
// on different ports, each writes its own context, and get instances in
// each context reaches that dev's own services; the second's context is
// current until it stops, then the first's again.
func TestDevSideBySide(t *testing.T) {
	home := t.TempDir()
	cfgPath := filepath.Join(home, "cfg", "config.hcl")
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "xdg"), "CCATTLER_CONFIG=" + cfgPath}
	dir := t.TempDir()
	alpha := writeFile(t, dir, "alpha.hcl", "service \"alpha\" {\n  image = \"nginx:1.28\"\n  instances = 1\n}\n")
	beta := writeFile(t, dir, "beta.hcl", "service \"beta\" {\n  image = \"nginx:1.28\"\n  instances = 1\n}\n")

	a := startDev(t, env, "--nodes", "1", "-f", alpha)
	ma := a.wait(t, devContextLine)
	a.wait(t, regexp.MustCompile(`publish_endpoint|report +instance \w+ state=running|schedule +placement/instance/`))
	b := startDev(t, env, "--nodes", "1", "-f", beta)
	mb := b.wait(t, devContextLine)
	if ma[1] == mb[1] || ma[2] == mb[2] {
		t.Fatalf("both devs took context %s / %s and etcd %s / %s", ma[1], mb[1], ma[2], mb[2])
	}
	if ma[3] != cfgPath || mb[3] != cfgPath {
		t.Errorf("contexts written to %s and %s, want %s", ma[3], mb[3], cfgPath)
	}
	// The second moved off the ports the first holds, and said so.
	b.wait(t, regexp.MustCompile(`^ccattler dev: \S+ is taken .*--listen-client http://127\.0\.0\.1:\d+ instead$`))
	metricsB := b.wait(t, regexp.MustCompile(`metrics (http://\S+/metrics),`))[1]

	instancesOf := func(extra []string, want string) {
		t.Helper()
		waitUntil(t, 60*time.Second, "get instances showing "+want, func() bool {
			r := runEnv(t, append(append([]string(nil), env...), extra...), "get", "instances", "-o", "json")
			return r.code == 0 && strings.Contains(r.stdout, `"`+want+`"`) && !strings.Contains(r.stdout, map[string]string{"alpha": `"beta"`, "beta": `"alpha"`}[want])
		})
	}
	instancesOf([]string{"CCATTLER_CONTEXT=" + ma[1]}, "alpha")
	instancesOf([]string{"CCATTLER_CONTEXT=" + mb[1]}, "beta")
	instancesOf(nil, "beta") // the current context: the latest dev's

	// dev serves /metrics like server.
	resp, err := http.Get(metricsB)
	if err != nil {
		t.Fatal(err)
	}
	body := new(bytes.Buffer)
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(body.String(), "ccattler_") {
		t.Errorf("GET %s: %d\n%.300s", metricsB, resp.StatusCode, body.String())
	}

	b.interrupt(t)
	instancesOf(nil, "alpha") // b's context went with it; a's is current again
	if r := runEnv(t, env, "config", "get-contexts"); strings.Contains(r.stdout, mb[1]+" ") {
		t.Errorf("the stopped dev's context %s is left:\n%s", mb[1], r.stdout)
	}
	a.interrupt(t)
	if r := runEnv(t, env, "config", "get-contexts"); !strings.Contains(r.stdout, "no contexts") {
		t.Errorf("contexts left after both devs stopped:\n%s", r.stdout)
	}
}

// TestDevWatchReloads: dev --watch DIR runs DIR's rules and reloads them
// when a file changes; ccattler rules reload reaches it; a broken edit is
// rejected and the running set stays.
func TestDevWatchReloads(t *testing.T) {
	home := t.TempDir()
	env := []string{"HOME=" + home, "CCATTLER_CONFIG=" + filepath.Join(home, "config.hcl")}
	pol := policyCopy(t, nil)
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	d := startDev(t, env, "--nodes", "1", "--watch", pol, "--listen-client", client,
		"--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--admin-addr", fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)), "-f", webExample)
	d.wait(t, devContextLine)
	d.wait(t, regexp.MustCompile(`publish_endpoint`))
	status := func() string {
		r := runEnv(t, env, "rules", "status", "-o", "json")
		if r.code != 0 {
			t.Fatalf("rules status: %d %s", r.code, r.stderr)
		}
		return r.stdout
	}
	v0 := versionOf(t, pol)
	if !strings.Contains(status(), v0) {
		t.Fatalf("dev does not run %s's version %s:\n%s", pol, v0, status())
	}
	// An edit is picked up by the watch.
	writeFile(t, pol, "scheduler.hcl", packing("scheduler.hcl", mustRead(t, filepath.Join(pol, "scheduler.hcl"))))
	v1 := versionOf(t, pol)
	waitUntil(t, 30*time.Second, "dev running the edited rules "+v1, func() bool { return strings.Contains(status(), v1) })
	// rules reload answers (unchanged now), a broken edit is rejected.
	if r := runEnv(t, env, "rules", "reload"); r.code != 0 || !strings.Contains(r.stdout, "unchanged") {
		t.Errorf("rules reload: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	writeFile(t, pol, "broken.hcl", "rule \"x\" {\n")
	r := runEnv(t, env, "rules", "reload")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "broken.hcl:") {
		t.Errorf("rules reload of a broken set: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(status(), v1) {
		t.Errorf("a broken set replaced the running one:\n%s", status())
	}
	mustExit(t, runEnv(t, env, "dev", "--watch", pol, "--policies", t.TempDir()), 2, "dev --watch and --policies disagreeing")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
