package etcdtest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/ccattler/ccattler/facts/pki"
	"google.golang.org/grpc"
)

// StartSecure starts an embedded etcd as `ccattler server` runs it by
// default: TLS on client and peer URLs, client certificates required and
// signed by a CA of the test's own, and etcd auth enabled with a root user
// whose certificate the test holds. Clients authenticate as principals
// with StoreAs.
func StartSecure(t testing.TB) *Etcd {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.Init(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("server", pki.Server|pki.Client, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	cfg := embedded.NewConfig()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.ClientURL = fmt.Sprintf("https://127.0.0.1:%d", FreePort(t))
	cfg.PeerURL = fmt.Sprintf("https://127.0.0.1:%d", FreePort(t))
	cfg.TLS = &embedded.TLS{CAFile: srv.CA, CertFile: srv.Cert, KeyFile: srv.Key}
	cfg.Solo = true
	e := &Etcd{Cfg: cfg, CA: ca}
	e.Restart(t)
	t.Cleanup(func() { e.Etcd.Close() })
	root := e.StoreAs(t, access.Root)
	if _, err := access.Enable(context.Background(), root); err != nil {
		t.Fatalf("enable etcd auth: %v", err)
	}
	return e
}

// StoreAs dials the secure member as principal (a certificate issued for
// it on first use); the store is closed when the test ends.
func (e *Etcd) StoreAs(t testing.TB, principal string) *facts.Store {
	t.Helper()
	return e.StoreAsWith(t, principal)
}

// StoreAsWith is StoreAs with extra gRPC dial options (StoreWith).
func (e *Etcd) StoreAsWith(t testing.TB, principal string, opts ...grpc.DialOption) *facts.Store {
	t.Helper()
	s, err := e.dialAs(principal, opts)
	if err != nil {
		t.Fatalf("dial embedded etcd as %s: %v", principal, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// DialAs is StoreAs returning the error (a principal etcd refuses fails here).
func (e *Etcd) DialAs(principal string) (*facts.Store, error) { return e.dialAs(principal, nil) }

func (e *Etcd) dialAs(principal string, opts []grpc.DialOption) (*facts.Store, error) {
	if e.CA == nil {
		return nil, fmt.Errorf("etcdtest: DialAs needs StartSecure")
	}
	p, err := e.CA.Ensure(principal, pki.Client)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := pki.ClientTLS(p.CA, p.Cert, p.Key)
	if err != nil {
		return nil, err
	}
	return facts.Dial(context.Background(), facts.StoreConfig{Endpoints: e.Endpoints(), Schema: facts.NewSchema(), TLS: tlsCfg, DialOptions: opts})
}
