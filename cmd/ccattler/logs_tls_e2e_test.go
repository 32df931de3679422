package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/facts/pki"
)

const logsService = `service "talk" {
  image     = "busybox:1"
  instances = 1
  command   = ["/bin/sh", "-c"]
  env       = { WORD = "psst" }
}
`

// startLogged starts a simulated node serving logs, applies logsService and
// returns the instance's id and where its output is served.
func startLogged(t *testing.T, c *cluster) (id, addr string) {
	t.Helper()
	addr = fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	c.agent("a", "--nodes", "1", "--node-prefix", "l-", "--logs-address", addr)
	c.apply(t.TempDir(), "talk.hcl", logsService)
	c.waitFor(20*time.Second, "talk running", func() bool {
		in := c.of("talk")
		if len(in) == 1 && in[0].state == "running" {
			id = in[0].id
			return true
		}
		return false
	})
	return id, addr
}

// The agent serves container output on its node's identity: the CLI
// (user:admin) and an auditor read it; a node's certificate, no
// certificate and plain HTTP get none of it.
func TestLogsTLSEndToEnd(t *testing.T) {
	c := newCluster(t)
	id, addr := startLogged(t, c)
	const want = `env ["WORD=psst"]`
	if r := c.srv.ccattler(t, "logs", id); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Fatalf("ccattler logs %s as user:admin: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	c.srv.admit(t, "auditor")
	if r := c.srv.ccattler(t, "logs", id, "--identity", "auditor"); r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("ccattler logs %s as auditor: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	// The node fleet's own certificate: etcd lets it read no other node's
	// placement (docs/security.md), and the log server refuses it (below).
	if r := c.srv.ccattler(t, "logs", id, "--identity", "node:l-*"); r.code != 1 || strings.Contains(r.stdout, "psst") ||
		!strings.Contains(r.stderr, "acting as node:l-*") {
		t.Errorf("ccattler logs as node:l-*: exit %d, want 1 with the refusal\n%s%s", r.code, r.stdout, r.stderr)
	}
	url := agent.LogURL(addr, "l-0001", id, false, true)
	ca, err := pki.ClientTLS(filepath.Join(c.srv.tlsDir, pki.CACertFile), "", "")
	if err != nil {
		t.Fatal(err)
	}
	noCert, err := pki.DialMutual(ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	fleet := pki.PathsOf(c.srv.tlsDir, "node:l-*")
	fleetTLS, err := pki.ClientTLS(fleet.CA, fleet.Cert, fleet.Key)
	if err != nil {
		t.Fatal(err)
	}
	nodeCert, err := pki.DialMutual(fleetTLS, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *http.Client
		url  string
		says string // what the refusal says, when it is an answer
	}{
		{"the node fleet's certificate", &http.Client{Transport: &http.Transport{TLSClientConfig: nodeCert}}, url, "node:l-* may not read container output"},
		{"no certificate", &http.Client{Transport: &http.Transport{TLSClientConfig: noCert}}, url, ""},
		{"plain HTTP", &http.Client{}, agent.LogURL(addr, "l-0001", id, false, false), ""},
		{"TLS without verifying, without a certificate", &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}, url, ""},
	} {
		tc.c.Timeout = 10 * time.Second
		resp, err := tc.c.Get(tc.url)
		if err != nil {
			if tc.says != "" {
				t.Errorf("%s: %v, want an answer refusing it", tc.name, err)
			}
			continue // refused at the handshake
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "psst") || !strings.Contains(string(b), tc.says) {
			t.Errorf("%s: %d %q, want it refused (saying %q)", tc.name, resp.StatusCode, b, tc.says)
		}
	}
}

// An insecure cluster (--insecure) has no identities: the agent serves
// plain HTTP, and ccattler logs reads it so.
func TestLogsInsecureEndToEnd(t *testing.T) {
	c := newClusterArgs(t, "--insecure")
	if c.srv.tlsDir != "" {
		t.Fatal("an --insecure server has certificates")
	}
	id, addr := startLogged(t, c)
	if r := c.srv.ccattler(t, "logs", id); r.code != 0 || !strings.Contains(r.stdout, `env ["WORD=psst"]`) {
		t.Fatalf("ccattler logs %s, insecure: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	if got := c.get(facts.NodeLogs("l-0001")); got != fmt.Sprintf("%q", addr) {
		t.Errorf("observed/node/l-0001/logs = %s, want %q", got, addr)
	}
}
