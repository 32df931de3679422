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

	"github.com/ccattler/ccattler/facts/etcdtest"
)

// The end-to-end tests run the real binary, built once here, against a real
// `ccattler server` subprocess with its embedded etcd.

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ccattler-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "ccattler")
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

// server is a `ccattler server` subprocess.
type server struct {
	cmd      *exec.Cmd
	client   string // the embedded etcd's client URL
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
	s := &server{cmd: exec.Command(bin, append([]string{"server"}, args...)...),
		ready: make(chan struct{}), exited: make(chan struct{})}
	for i, a := range args {
		if a == "--listen-client" && i+1 < len(args) {
			s.client = args[i+1]
		}
	}
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

// ccattler runs the binary with --etcd pointed at the server.
func (s *server) ccattler(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, append([]string{"--etcd", s.client}, args...)...)
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "CCATTLER_ETCD=")
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
