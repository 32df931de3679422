package pki_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts/pki"
)

func TestIssueAndVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	ca, err := pki.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{pki.CAKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v; want 0600", f, err, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v; want 0700", st.Mode().Perm())
	}
	if _, err := pki.Init(dir); err == nil || !strings.Contains(err.Error(), "already holds a CA") {
		t.Errorf("second Init: %v; want a refusal", err)
	}
	p, err := ca.Issue("node:node-2", pki.Client)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p.Key); st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v", st.Mode().Perm())
	}
	if cn, err := pki.CommonName(p.Cert); err != nil || cn != "node:node-2" {
		t.Errorf("CommonName = %q, %v", cn, err)
	}
	pair, err := tls.LoadX509KeyPair(p.Cert, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("a client certificate does not verify as one: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies as a server's")
	}

	// A CA of its own does not vouch for another's certificates.
	other, err := pki.Init(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	op := x509.NewCertPool()
	op.AddCert(other.Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: op, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Error("another CA verifies this CA's certificate")
	}
}

func TestEnsureReissuesOnlyWhenNeeded(t *testing.T) {
	ca, err := pki.Init(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.Ensure("server", pki.Server|pki.Client, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(p.Cert)
	if _, err := ca.Ensure("server", pki.Server|pki.Client, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if same, _ := os.ReadFile(p.Cert); string(same) != string(before) {
		t.Error("Ensure reissued a certificate that covers the hosts")
	}
	if _, err := ca.Ensure("server", pki.Server|pki.Client, "127.0.0.1", "10.9.9.9"); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(p.Cert); string(after) == string(before) {
		t.Error("Ensure kept a certificate that does not cover a new host")
	}
	if err := os.WriteFile(p.Cert, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Ensure("server", pki.Server|pki.Client, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.CommonName(p.Cert); err != nil {
		t.Errorf("Ensure left a broken certificate: %v", err)
	}
}

func TestLoadRejectsMistakes(t *testing.T) {
	if _, err := pki.Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "certs init") {
		t.Errorf("Load of an empty dir: %v; want ErrNoCA naming certs init", err)
	}
	a, _ := pki.Init(filepath.Join(t.TempDir(), "a"))
	b, _ := pki.Init(filepath.Join(t.TempDir(), "b"))
	key, _ := os.ReadFile(filepath.Join(b.Dir, pki.CAKeyFile))
	if err := os.WriteFile(filepath.Join(a.Dir, pki.CAKeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Load(a.Dir); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Errorf("Load with another CA's key: %v", err)
	}
	for _, name := range []string{"", "ca", "../etc/passwd", "User:Bob", ".hidden"} {
		if _, err := a.Issue(name, pki.Client); err == nil {
			t.Errorf("Issue(%q) accepted", name)
		}
	}
	if _, err := pki.ClientTLS(filepath.Join(a.Dir, pki.CACertFile), "x.crt", ""); err == nil {
		t.Error("ClientTLS with a cert and no key accepted")
	}
}
