package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/facts/pki"
)

// The trust boundary through the real binary: a server with its defaults
// serves TLS only with etcd auth on, agents run under their node's
// certificate, and etcd itself refuses every write outside a principal's
// grants — checked with the principals' own certificates.
func TestSecureByDefault(t *testing.T) {
	dir := t.TempDir()
	port := etcdtest.FreePort(t)
	srv := startServer(t, "--data-dir", dir, "--engine-id", "secure-1", "--admin-addr", "",
		"--listen-client", fmt.Sprintf("https://127.0.0.1:%d", port),
		"--listen-peer", fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t)))
	if !strings.HasPrefix(srv.client, "https://") {
		t.Fatalf("client URL %s", srv.client)
	}
	for _, f := range []string{"ca.key", "root.key", "engine.key", "user:admin.key"} {
		st, err := os.Stat(srv.tlsDir + "/" + f)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, st.Mode().Perm())
		}
	}

	t.Run("plain http is not served", func(t *testing.T) {
		c := http.Client{Timeout: 3 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/version", port))
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("plain http answered %s", resp.Status)
			}
		}
		// It says what to give instead, once: not also a lost quorum.
		r := run(t, "--etcd", fmt.Sprintf("http://127.0.0.1:%d", port), "--dial-timeout", "1s", "get", "services")
		if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("etcd at http://127.0.0.1:%d serves TLS", port)) ||
			!strings.Contains(r.stderr, fmt.Sprintf("give https://127.0.0.1:%d and the cluster's certificates", port)) || strings.Contains(r.stderr, "quorum") {
			t.Errorf("a plain client: exit %d, want 1 and what to give instead\n%s", r.code, r.stderr)
		}
	})

	// Three nodes, each under its own certificate, as the lifecycle
	// example has them.
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		args := append(srv.agentFlags(t, "node:"+n), "agent", "--runtime", "sim", "--node-id", n,
			"--state-dir", t.TempDir(), "--cpu", "4", "--memory", "8Gi", "--sim-start-delay", "10ms")
		cmd := exec.Command(bin, args...)
		var logb bytes.Buffer
		cmd.Stderr = &logb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("agent %s:\n%s", n, logb.String())
			}
		})
	}
	waitUntil(t, 30*time.Second, "three nodes alive", func() bool {
		return strings.Count(srv.ok(t, "get", "nodes"), "alive") == 3
	})
	srv.ok(t, "apply", "-f", webExample)
	waitUntil(t, 30*time.Second, "three web instances running with endpoints", func() bool {
		vals, _, _ := srv.factsUnder(t, "endpoint/service/web/", "placement/instance/")
		eps, nodes := 0, map[string]bool{}
		for k, v := range vals {
			if strings.HasPrefix(k, "endpoint/") {
				eps++
			} else {
				nodes[v] = true
			}
		}
		return eps == 3 && len(nodes) == 3
	})
	vals, _, _ := srv.factsUnder(t, "lease/node/", "effective/")
	if vals["effective/service/web/instances"] != "3" || len(vals) != 4 {
		t.Errorf("leases and effective: %v", vals)
	}

	node2 := mustDial(t, srv, "node:node-2")
	t.Run("a node may report, never decide", func(t *testing.T) {
		for _, key := range []string{
			"desired/service/evil/image", "placement/instance/x", "effective/service/web/instances",
			"endpoint/service/web/abcde", "intent/user/service/web/instances", "auth/node:node-2/rules",
			"schema/evil", "observed/node/node-1/state", "lease/node/node-1", "event/20261201T000000.000000000Z-000001",
		} {
			if err := putAs(node2, key, `"evil"`); !access.IsDenied(err) {
				t.Errorf("node-2 put %s: %v; want permission denied", key, err)
			}
		}
		if err := putAs(node2, "observed/node/node-2/state", `"alive"`); err != nil {
			t.Errorf("node-2 put its own state: %v", err)
		}
	})
	t.Run("etcdctl with the principals' own certificates", func(t *testing.T) {
		etcdctl, err := exec.LookPath("etcdctl")
		if err != nil {
			skipOrFailCI(t, "etcdctl not installed (apt-get install -y etcd-client)")
		}
		ctl := func(principal string, args ...string) (string, error) {
			p := pki.PathsOf(srv.tlsDir, principal)
			cmd := exec.Command(etcdctl, append([]string{"--endpoints", srv.client, "--cacert", p.CA, "--cert", p.Cert, "--key", p.Key,
				"--dial-timeout", "3s", "--command-timeout", "5s"}, args...)...)
			cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		for _, key := range []string{"desired/service/evil/image", "placement/instance/x", "lease/node/node-1"} {
			if out, err := ctl("node:node-2", "put", facts.DefaultRoot+key, `"evil"`); err == nil || !strings.Contains(out, "permission denied") {
				t.Errorf("etcdctl as node-2 put %s: %v %s; want permission denied", key, err, out)
			}
		}
		if out, err := ctl("node:node-2", "put", facts.DefaultRoot+"observed/node/node-2/zone", `"default"`); err != nil {
			t.Errorf("etcdctl as node-2 put its own zone: %v %s", err, out)
		}
		srv.admit(t, "auditor")
		if out, err := ctl("auditor", "get", "--prefix", "--keys-only", facts.DefaultRoot+"desired/"); err != nil || !strings.Contains(out, "desired/service/web") {
			t.Errorf("etcdctl as auditor read desired/: %v %s", err, out)
		}
		if out, err := ctl("auditor", "put", facts.DefaultRoot+"desired/service/web/instances", "9"); err == nil || !strings.Contains(out, "permission denied") {
			t.Errorf("etcdctl as auditor put: %v %s; want permission denied", err, out)
		}
	})
	t.Run("a user declares, an auditor reads", func(t *testing.T) {
		srv.admit(t, "user:alice")
		alice := mustDial(t, srv, "user:alice")
		if err := putAs(alice, "desired/service/web/instances", "3"); err != nil {
			t.Errorf("alice put desired/: %v", err)
		}
		if err := putAs(alice, "placement/instance/x", `"node-1"`); !access.IsDenied(err) {
			t.Errorf("alice put placement/: %v; want permission denied", err)
		}
		srv.admit(t, "auditor")
		auditor := mustDial(t, srv, "auditor")
		for _, key := range []string{"desired/service/web/instances", "observed/node/node-1/state", "auth/auditor/rules"} {
			if err := putAs(auditor, key, "1"); !access.IsDenied(err) {
				t.Errorf("auditor put %s: %v; want permission denied", key, err)
			}
		}
		r := run(t, "--etcd", srv.client, "--tls-dir", srv.tlsDir, "--identity", "auditor", "get", "instances")
		if r.code != 0 || strings.Count(r.stdout, "running") != 3 {
			t.Errorf("auditor get instances: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// A refusal names the principal the command acted as, whether
		// etcd refused a write (the auditor's scale) or a read (a node's
		// get services: nodes do not read desired/).
		for _, who := range []string{"auditor", "node:node-1"} {
			args := []string{"scale", "service", "web", "5"}
			if who != "auditor" {
				args = []string{"get", "services"}
			}
			r := run(t, append([]string{"--etcd", srv.client, "--tls-dir", srv.tlsDir, "--identity", who}, args...)...)
			if want := "permission denied: acting as " + who + ", whose grants do not cover this key"; r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Errorf("%s %s: exit %d, want 1 and %q; stderr:\n%s", who, strings.Join(args, " "), r.code, want, r.stderr)
			}
		}
	})
	t.Run("without a certificate nothing", func(t *testing.T) {
		tlsCfg, err := pki.ClientTLS(pki.PathsOf(srv.tlsDir, "x").CA, "", "")
		if err != nil {
			t.Fatal(err)
		}
		s, err := facts.Dial(context.Background(), facts.StoreConfig{Endpoints: []string{srv.client}, TLS: tlsCfg, DialTimeout: 2 * time.Second})
		if err == nil {
			defer s.Close()
			if err := putAs(s, "desired/service/evil/image", `"evil"`); err == nil {
				t.Fatal("a client without a certificate wrote desired/")
			}
		}
	})
	t.Run("removing a principal's rules revokes it", func(t *testing.T) {
		node3 := mustDial(t, srv, "node:node-3")
		if err := putAs(node3, "observed/node/node-3/zone", `"default"`); err != nil {
			t.Fatalf("node-3 before: %v", err)
		}
		start := time.Now()
		srv.ok(t, "auth", "rm", "node:node-3")
		waitUntil(t, 10*time.Second, "node-3 refused", func() bool {
			return putAs(node3, "observed/node/node-3/zone", `"default"`) != nil
		})
		t.Logf("node-3 refused %s after its rules were removed", time.Since(start).Round(time.Millisecond))
	})
}

// TestReloadBeyondTheEnginesGrants: a rule set with a rule whose principal
// may write more than etcd lets the engine write is rejected at start.
func TestPoliciesBeyondTheEnginesGrants(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "admin.hcl", adminRule)
	cmd := exec.Command(bin, "server", "--data-dir", t.TempDir(), "--policies", dir, "--admin-addr", "",
		"--listen-client", fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t)),
		"--listen-peer", fmt.Sprintf("https://127.0.0.1:%d", etcdtest.FreePort(t)))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("server started with a rule beyond the engine's grants:\n%s", out)
	}
	if !strings.Contains(string(out), "Principal beyond the engine's grants") || !strings.Contains(string(out), "admin.hcl:1") {
		t.Errorf("output does not name the rule and the reason:\n%s", out)
	}
}

// TestWatchReloadBeyondTheEnginesGrants: the same rule dropped into a
// watched policy directory is rejected as a reload; the running set stays.
func TestWatchReloadBeyondTheEnginesGrants(t *testing.T) {
	dir := policyCopy(t, nil)
	srv, _ := newEngineServer(t, "--policies", dir, "--watch")
	before := versionOf(t, dir)
	writeFile(t, dir, "admin.hcl", adminRule)
	waitUntil(t, 20*time.Second, "the reload rejected", func() bool {
		return strings.Contains(srv.logText(), "reload: rule set rejected") && strings.Contains(srv.logText(), "Principal beyond the engine's grants")
	})
	if st := statusJSON(t, srv); fmt.Sprint(st["version"]) != before {
		t.Errorf("running version after the rejected reload: %v, want %s", st["version"], before)
	}
	srv.ok(t, "get", "services") // still serving
}

const adminRule = `rule "anything" {
  doc       = "writes where only an admin may"
  principal = "admin"
  match {
    service = "desired/service/{svc}"
  }
  derive "desired/service/{svc}/instances" {
    value = "1"
  }
}
`

func mustDial(t *testing.T, srv *server, principal string) *facts.Store {
	t.Helper()
	s, err := srv.dialAs(principal)
	if err != nil {
		t.Fatalf("dial as %s: %v", principal, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func putAs(s *facts.Store, key, value string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := etcdtest.PutRaw(ctx, s, key, value)
	return err
}
