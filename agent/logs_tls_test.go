package agent_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts/pki"
)

// issue returns the client TLS configuration of principal, issued by ca.
func issue(t *testing.T, ca *pki.CA, principal string) *tls.Config {
	t.Helper()
	p, err := ca.Issue(principal, pki.Client)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ClientTLS(p.CA, p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLogServerTLS: on the node's identity, the log server answers users
// and auditors only: no certificate, another CA's, a node's or plain HTTP
// get nothing of a container's output. The client side believes only the
// node the facts name.
func TestLogServerTLS(t *testing.T) {
	ca, err := pki.Init(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.Init(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.NewConfig()
	cfg.StartDelay = 0
	fleet, err := sim.NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := fleet.Node("n1")
	if _, err := rt.Start(context.Background(), agent.Spec{ID: "a0001", Service: "web", Image: "web:1",
		Env: map[string]string{"SECRET": "s3"}}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	serverTLS, err := pki.ServeMutual(issue(t, ca, "node:n1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ls := &agent.LogServer{Addr: addr, Nodes: []agent.NodeConfig{{ID: "n1", Runtime: rt}}, TLS: serverTLS}
	errc := make(chan error, 1)
	go func() { errc <- ls.Serve(ctx) }()
	url := agent.LogURL(addr, "n1", "a0001", false, true)

	// asNode dials as the CLI does: its certificates, believing node n1 only.
	asNode := func(t *testing.T, cli *tls.Config, node string) *http.Client {
		t.Helper()
		c, err := pki.DialMutual(cli, func(cn string) error {
			if cn != "node:"+node {
				return fmt.Errorf("answers as %q, not node:%s", cn, node)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: c}, Timeout: 10 * time.Second}
	}
	get := func(c *http.Client, url string) (int, string, error) {
		var resp *http.Response
		var err error
		for i := 0; i < 100; i++ {
			if resp, err = c.Get(url); err == nil || !strings.Contains(err.Error(), "connection refused") {
				break
			}
			time.Sleep(20 * time.Millisecond) // the server is starting
		}
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}

	for _, who := range []string{"user:alice", "user:admin", "auditor"} {
		t.Run(who+" reads", func(t *testing.T) {
			code, body, err := get(asNode(t, issue(t, ca, who), "n1"), url)
			if err != nil || code != 200 || !strings.Contains(body, `env ["SECRET=s3"]`) {
				t.Errorf("GET as %s: %d %q %v, want 200 with the output", who, code, body, err)
			}
		})
	}
	for _, who := range []string{"node:n2", "node:n1", "node:n*", "engine"} {
		t.Run(who+" is refused", func(t *testing.T) {
			code, body, err := get(asNode(t, issue(t, ca, who), "n1"), url)
			if err != nil || code != http.StatusForbidden || strings.Contains(body, "SECRET") || !strings.Contains(body, who+" may not read container output") {
				t.Errorf("GET as %s: %d %q %v, want 403 naming it", who, code, body, err)
			}
		})
	}
	t.Run("no client certificate", func(t *testing.T) {
		cli := issue(t, ca, "user:alice")
		cli.Certificates = nil
		if code, body, err := get(asNode(t, cli, "n1"), url); err == nil {
			t.Errorf("GET without a certificate: %d %q, want the handshake refused", code, body)
		}
	})
	t.Run("a certificate of another CA", func(t *testing.T) {
		cli := issue(t, other, "user:alice")
		cli.RootCAs = issue(t, ca, "user:carol").RootCAs // it trusts the server; the server does not trust it
		if code, body, err := get(asNode(t, cli, "n1"), url); err == nil {
			t.Errorf("GET with another CA's certificate: %d %q, want the handshake refused", code, body)
		}
	})
	t.Run("plain HTTP", func(t *testing.T) {
		code, body, err := get(&http.Client{Timeout: 10 * time.Second}, agent.LogURL(addr, "n1", "a0001", false, false))
		if err == nil && (code == 200 || strings.Contains(body, "SECRET")) {
			t.Errorf("plain GET: %d %q, want it refused", code, body)
		}
	})
	t.Run("the client believes only the node the facts name", func(t *testing.T) {
		if code, _, err := get(asNode(t, issue(t, ca, "user:alice"), "n2"), url); err == nil || !strings.Contains(err.Error(), `answers as "node:n1", not node:n2`) {
			t.Errorf("GET from n1 expecting n2: %d %v, want the server refused by name", code, err)
		}
		// nor a server of another CA that takes the same name
		cli := issue(t, other, "user:alice")
		if code, _, err := get(asNode(t, cli, "n1"), url); err == nil || !strings.Contains(err.Error(), "not a principal of this cluster's CA") {
			t.Errorf("GET trusting another CA: %d %v, want the server refused", code, err)
		}
	})
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestLogServerTLSNeedsClientCerts: a TLS configuration that does not
// require client certificates is refused, not served open.
func TestLogServerTLSNeedsClientCerts(t *testing.T) {
	ls := &agent.LogServer{Addr: "127.0.0.1:0", TLS: &tls.Config{}}
	if err := ls.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "client certificates") {
		t.Fatalf("Serve with an open TLS configuration: %v", err)
	}
}
