package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts/etcdtest"
)

// `ccattler server --policies DIR` runs the rule set: applying a service
// makes the engine derive its effective count and create its pending
// instances, each write with its firing record.
func TestServerRunsPolicies(t *testing.T) {
	srv := startServer(t, "--data-dir", t.TempDir(),
		"--listen-client", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--policies", "../../engine/eval/testdata/aggregate", "--engine-id", "server-1")
	srv.ok(t, "apply", "-f", webExample)
	deadline := time.Now().Add(20 * time.Second)
	for {
		vals, _, _ := srv.factsUnder(t, "effective/", "observed/instance/")
		pending := 0
		for k, v := range vals {
			if strings.HasSuffix(k, "/state") && v == `"pending"` {
				pending++
			}
		}
		if vals["effective/service/web/instances"] == "3" && pending == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine did not derive the effective count and 3 pending instances: %v\n%s", vals, srv.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	events, revs, _ := srv.factsUnder(t, "event/")
	_, factRevs, _ := srv.factsUnder(t, "effective/")
	found := false
	for k, v := range events {
		if strings.Contains(v, `"rule": "resolve_intent"`) && strings.Contains(v, `"leader": "server-1"`) {
			found = revs[k] == factRevs["effective/service/web/instances"]
		}
	}
	if !found {
		t.Errorf("no firing record of resolve_intent by server-1 at the revision of its write: %v", events)
	}
	if !strings.Contains(srv.logText(), "engine: leading") {
		t.Errorf("server log does not show the engine leading:\n%s", srv.logText())
	}
}

// A rule set with an error keeps the server from starting, with the
// problem's file:line:col.
func TestServerRejectsBadPolicies(t *testing.T) {
	dir := t.TempDir()
	bad := "rule \"broken\" {\n  doc = \"x\"\n  principal = \"instances\"\n  match {\n    n = \"nowhere/{x}\"\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "bad.hcl"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "server", "--data-dir", t.TempDir(),
		"--listen-client", fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--listen-peer", fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--policies", dir)
	out, err := cmd.CombinedOutput()
	if err == nil || cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("server started with a bad rule set:\n%s", out)
	}
	if !strings.Contains(string(out), "bad.hcl:5:") {
		t.Errorf("output does not name bad.hcl:5:col:\n%s", out)
	}
}

// Two servers with --policies share one etcd: one leads, the other waits;
// when the leader stops, the standby takes over within seconds and the
// records of what it writes name it.
func TestServerStandbyTakesOver(t *testing.T) {
	store := newServer(t, t.TempDir()) // the fact store only: no engine
	engineServer := func(id string) *server {
		s := startServer(t, "--etcd", store.client, "--policies", "../../engine/eval/testdata/aggregate",
			"--engine-id", id, "--leader-ttl", "2s", "--admin-addr", "")
		s.client, s.tlsDir = store.client, store.tlsDir
		return s
	}
	a := engineServer("server-a")
	waitLog := func(s *server, what string, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for !strings.Contains(s.logText(), what) {
			if time.Since(start) > within {
				t.Fatalf("no %q in the log within %s:\n%s", what, within, s.logText())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitLog(a, "engine: leading", 10*time.Second)
	b := engineServer("server-b")
	waitLog(b, "engine: campaigning", 10*time.Second)

	leaderOf := func(key string) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			vals, revs, _ := store.factsUnder(t, "effective/", "event/")
			for k, v := range vals {
				if strings.HasPrefix(k, "event/") && revs[k] == revs[key] && strings.Contains(v, `"rule": "resolve_intent"`) {
					for _, id := range []string{"server-a", "server-b", "server-c"} {
						if strings.Contains(v, `"leader": "`+id+`"`) {
							return id
						}
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no record of the write of %s", key)
		return ""
	}
	store.ok(t, "apply", "-f", webExample)
	if who := leaderOf("effective/service/web/instances"); who != "server-a" {
		t.Errorf("first write by %s, want server-a", who)
	}
	if strings.Contains(b.logText(), "engine: leading") {
		t.Fatalf("the standby leads too:\n%s", b.logText())
	}

	a.stop(t)
	took := waitLog(b, "engine: leading", 10*time.Second)
	t.Logf("standby leads %s after the leader stopped", took)
	dir := t.TempDir()
	web := filepath.Join(dir, "web.hcl")
	if err := os.WriteFile(web, []byte("service \"web\" {\n  image     = \"nginx:1.28\"\n  instances = 5\n  expose    = [8080]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store.ok(t, "apply", "-f", web)
	deadline := time.Now().Add(20 * time.Second)
	for {
		vals, _, _ := store.factsUnder(t, "effective/")
		if vals["effective/service/web/instances"] == "5" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new leader did not derive 5:\n%s", b.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if who := leaderOf("effective/service/web/instances"); who != "server-b" {
		t.Errorf("write after the failover by %s, want server-b", who)
	}

	// A leader that dies without resigning: its lease runs out (--leader-ttl
	// 2s) and the standby takes over.
	c := engineServer("server-c")
	waitLog(c, "engine: campaigning", 10*time.Second)
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	took = waitLog(c, "engine: leading", 15*time.Second)
	t.Logf("standby leads %s after the leader was killed", took)
	store.ok(t, "apply", "-f", webExample)
	deadline = time.Now().Add(20 * time.Second)
	for {
		vals, _, _ := store.factsUnder(t, "effective/")
		if vals["effective/service/web/instances"] == "3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the third leader did not derive 3:\n%s", c.logText())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if who := leaderOf("effective/service/web/instances"); who != "server-c" {
		t.Errorf("write after the leader died by %s, want server-c", who)
	}
}
