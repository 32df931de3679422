package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/facts/pki"
)

// The end-to-end tests run the real binary, built once here, against a real
// `ccattler server` subprocess with its embedded etcd.

var bin string

func TestMain(m *testing.M) {
	if os.Getenv(interruptChildEnv) != "" { // a child of TestForcedStopRunsItsCleanups: no binary needed
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ccattler-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "ccattler")
	// The binary's client configuration lives in the test's directory, never
	// in the real home: ccattler dev writes its context there.
	os.Setenv("CCATTLER_CONFIG", filepath.Join(dir, "config.hcl"))
	os.Unsetenv("CCATTLER_CONTEXT")
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	build := exec.Command(gobin, "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build ccattler:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a `ccattler server` subprocess. It runs secure, as by
// default, unless a test passes --insecure (and says why): its clients use
// the certificates the server made in DATA-DIR/pki.
type server struct {
	cmd      *exec.Cmd
	client   string // the embedded etcd's client URL
	tlsDir   string // the CA and certificates of a secure server; "" when insecure
	mu       sync.Mutex
	log      bytes.Buffer // stderr so far; guarded by mu
	ready    chan struct{}
	exited   chan struct{}
	exitCode int // set before exited closes
}

// startServer runs the binary's server with the given arguments and waits
// until it logs "server ready". It is interrupted at the end of the test.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	args, s := secureArgs(args)
	s.cmd = exec.Command(bin, append([]string{"server"}, args...)...)
	s.ready, s.exited = make(chan struct{}), make(chan struct{})
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		readyOnce := sync.Once{}
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			if strings.Contains(sc.Text(), `msg="server ready"`) {
				readyOnce.Do(func() { close(s.ready) })
			}
		}
		_ = s.cmd.Wait()
		s.exitCode = s.cmd.ProcessState.ExitCode()
		close(s.exited)
	}()
	t.Cleanup(func() { s.stop(t) })
	select {
	case <-s.ready:
	case <-s.exited:
		t.Fatalf("server exited with %d before it was ready:\n%s", s.exitCode, s.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("server not ready within 60s:\n%s", s.logText())
	}
	return s
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop interrupts the server like Ctrl-C and returns how long it took to exit.
func (s *server) stop(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-s.exited:
		return 0
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		t.Errorf("server did not exit within 30s of SIGINT:\n%s", s.logText())
	}
	return time.Since(start)
}

// newServer starts a server on free ports with its data in dir.
func newServer(t *testing.T, dir string) *server {
	t.Helper()
	return startServer(t, "--no-engine", "--data-dir", dir,
		"--listen-client", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)))
}

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// ccattler runs the binary with --etcd pointed at the server, as
// user:admin when the server is secure.
func (s *server) ccattler(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, append(s.flags(), args...)...)
}

// flags are the global flags that reach the server.
func (s *server) flags() []string {
	if s.tlsDir == "" {
		return []string{"--etcd", s.client}
	}
	return []string{"--etcd", s.client, "--tls-dir", s.tlsDir}
}

// tlsDirs are the certificate directories of the secure servers running,
// by client URL: a server started with --etcd URL connects as their root.
var tlsDirs sync.Map

// secureArgs reads a server's arguments: unless --insecure, the listen
// URLs become https and the clients' certificates are those in the data
// dir; a server against another's etcd (--etcd) gets that one's.
func secureArgs(args []string) ([]string, *server) {
	s := &server{}
	insecure, dataDir, etcd := false, "ccattler-data", ""
	for i, a := range args {
		switch {
		case a == "--insecure":
			insecure = true
		case a == "--data-dir" && i+1 < len(args):
			dataDir = args[i+1]
		case a == "--etcd" && i+1 < len(args):
			etcd = args[i+1]
		}
	}
	out := append([]string(nil), args...)
	for i, a := range out {
		if (a == "--listen-client" || a == "--listen-peer") && i+1 < len(out) && !insecure {
			out[i+1] = strings.Replace(out[i+1], "http://", "https://", 1)
		}
		if a == "--listen-client" && i+1 < len(out) {
			s.client = out[i+1]
		}
	}
	switch {
	case etcd != "":
		if dir, ok := tlsDirs.Load(etcd); ok {
			s.tlsDir = dir.(string)
			out = append(out, "--tls-dir", s.tlsDir)
		}
	case !insecure:
		s.tlsDir = filepath.Join(dataDir, "pki")
		if s.client != "" {
			tlsDirs.Store(s.client, s.tlsDir)
		}
	}
	return out, s
}

// admit lets principal in: its certificate from the server's CA and its
// default rules (ccattler certs issue, ccattler auth add), then waits
// until etcd accepts it. A no-op for an insecure server.
func (s *server) admit(t *testing.T, principal string) {
	t.Helper()
	if s.tlsDir == "" {
		return
	}
	if r := run(t, "certs", "issue", "--dir", s.tlsDir, "--name", principal); r.code != 0 {
		t.Fatalf("certs issue %s: exit %d\n%s", principal, r.code, r.stderr)
	}
	if r := s.ccattler(t, "auth", "add", principal); r.code != 0 && !strings.Contains(r.stderr, "has rules already") {
		t.Fatalf("auth add %s: exit %d\n%s", principal, r.code, r.stderr)
	}
	// The server syncs etcd's users within about a second.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := s.dialAs(principal)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _, err = st.Count(ctx, "schema/")
			cancel()
			st.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd does not accept %s within 20s: %v", principal, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// agentFlags are the global flags of an agent as principal (admitted first).
func (s *server) agentFlags(t *testing.T, principal string) []string {
	t.Helper()
	s.admit(t, principal)
	return s.flags()
}

// agentPrincipal is the identity `ccattler agent` takes with args: node:{id}
// for one node named with --node-id, node:{prefix}* for a simulated fleet.
func agentPrincipal(args []string) string {
	id, prefix, nodes := "", "sim-", "1"
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--node-id":
			id = args[i+1]
		case "--node-prefix":
			prefix = args[i+1]
		case "--nodes":
			nodes = args[i+1]
		}
	}
	if id != "" && nodes == "1" {
		return "node:" + id
	}
	return "node:" + prefix + "*"
}

// dialAs connects to the server's etcd as principal (root: every key).
func (s *server) dialAs(principal string) (*facts.Store, error) {
	cfg := facts.StoreConfig{Endpoints: []string{s.client}, Schema: facts.NewSchema()}
	if s.tlsDir != "" {
		p := pki.PathsOf(s.tlsDir, principal)
		tlsCfg, err := pki.ClientTLS(p.CA, p.Cert, p.Key)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tlsCfg
	}
	return facts.Dial(context.Background(), cfg)
}

// dial connects to the server's etcd as root, for a test's own reads and
// writes (closed at the end of the test).
func (s *server) dial(t *testing.T) *facts.Store {
	t.Helper()
	st, err := s.dialAs(access.Root)
	if err != nil {
		t.Fatalf("dial the server's etcd: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, append(os.Environ(), "CCATTLER_ETCD="), 60*time.Second, args...)
}

// runWith runs the binary in environment env, killed after timeout.
func runWith(t *testing.T, env []string, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("ccattler %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// ok runs the binary and fails the test unless it exits 0.
func (s *server) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := s.ccattler(t, args...)
	if r.code != 0 {
		t.Fatalf("ccattler %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// factsJSON is the output of `facts get -o json`.
type factsJSON struct {
	Revision int64 `json:"revision"`
	Facts    []struct {
		Key         string          `json:"key"`
		Value       json.RawMessage `json:"value"`
		ModRevision int64           `json:"mod_revision"`
	} `json:"facts"`
}

// factsUnder reads every fact under the prefixes through the binary.
func (s *server) factsUnder(t *testing.T, prefixes ...string) (map[string]string, map[string]int64, int64) {
	t.Helper()
	vals, revs := map[string]string{}, map[string]int64{}
	var rev int64
	for _, p := range prefixes {
		var fj factsJSON
		if err := json.Unmarshal([]byte(s.ok(t, "facts", "get", p, "-o", "json")), &fj); err != nil {
			t.Fatalf("facts get %s -o json: %v", p, err)
		}
		rev = fj.Revision
		for _, f := range fj.Facts {
			vals[f.Key] = string(f.Value)
			revs[f.Key] = f.ModRevision
		}
	}
	return vals, revs, rev
}

func writeFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
