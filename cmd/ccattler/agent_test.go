package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

func TestAgentRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		flag string // the flag the message must name
	}{
		{"memory quantity", []string{"--runtime", "sim", "--memory", "12XB"}, "--memory"},
		{"runtime", []string{"--runtime", "docker"}, "--runtime"},
		{"several nodes without sim", []string{"--runtime", "containerd", "--nodes", "5"}, "--nodes"},
		{"missing containerd socket", []string{"--runtime", "containerd", "--node-id", "n1",
			"--containerd-address", filepath.Join(dir, "none.sock")}, "--containerd-address"},
		{"lease shorter than etcd allows", []string{"--runtime", "sim", "--lease-ttl", "1s"}, "--lease-ttl"},
		{"failure rate above 1", []string{"--runtime", "sim", "--sim-failure-rate", "2"}, "--sim-failure-rate"},
		{"ip range", []string{"--runtime", "sim", "--sim-ip-range", "10.0.0.0"}, "--sim-ip-range"},
		{"zone", []string{"--runtime", "sim", "--zone", "EU_1"}, "--zone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--etcd", "http://127.0.0.1:1", "agent", "--state-dir", dir}, tc.args...)
			r := run(t, args...)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2 (usage)\nstderr: %s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.flag) {
				t.Fatalf("the message does not name %s: %s", tc.flag, r.stderr)
			}
			if r.took > 20*time.Second {
				t.Fatalf("took %s to reject", r.took)
			}
		})
	}
}

func TestAgentSimNodesEndToEnd(t *testing.T) {
	s := newServer(t, t.TempDir())
	cmd := exec.Command(bin, append(s.agentFlags(t, "node:e2e-*"), "agent", "--runtime", "sim", "--nodes", "3", "--node-prefix", "e2e-",
		"--state-dir", t.TempDir(), "--cpu", "2", "--memory", "4Gi", "--zone", "eu-1a", "--sim-start-delay", "10ms")...)
	var mu sync.Mutex
	var logb bytes.Buffer
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logb.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })

	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s within 30s; agent log:\n%s", what, logb.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	wait("three alive nodes", func() bool {
		out := s.ok(t, "get", "nodes")
		return strings.Count(out, "alive") == 3 && strings.Contains(out, "e2e-0003")
	})

	store := s.dial(t)
	var ops []facts.Op
	for k, v := range map[string]string{
		facts.DesiredService("web"): `{}`, facts.ServiceImage("web"): `"nginx:1.28"`,
		facts.InstanceService("a8f31"): `"web"`, facts.Placement("a8f31"): `"e2e-0002"`,
		facts.NodePlacement("e2e-0002", "a8f31"): `"web"`,
	} {
		ops = append(ops, facts.Put(k, []byte(v)))
	}
	if _, err := store.Commit(context.Background(), facts.Txn{Ops: ops}); err != nil {
		t.Fatal(err)
	}
	wait("the placed instance reported running on e2e-0002", func() bool {
		vals, _, _ := s.factsUnder(t, "observed/instance/a8f31/")
		return vals["observed/instance/a8f31/state"] == `"running"` && vals["observed/instance/a8f31/node"] == `"e2e-0002"`
	})

	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("agent exited with %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("agent did not exit within 15s of SIGTERM")
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logb.String(), "containers keep running") {
		t.Errorf("exit message missing; log:\n%s", logb.String())
	}
	t.Logf("agent exited %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
