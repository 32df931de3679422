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
		"--listen-client", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--policies", dir)
	out, err := cmd.CombinedOutput()
	if err == nil || cmd.ProcessState.ExitCode() == 0 {
		t.Fatalf("server started with a bad rule set:\n%s", out)
	}
	if !strings.Contains(string(out), "bad.hcl:5:") {
		t.Errorf("output does not name bad.hcl:5:col:\n%s", out)
	}
}
