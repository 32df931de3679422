package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts/pki"
)

// A careless user's TLS flags: a plain endpoint with certificates, half a
// key pair, a --tls-dir without the principal's certificate.
func TestTLSFlagMistakes(t *testing.T) {
	if eps, err := secureEndpoints([]string{defaultEtcdPlain}, true); err != nil || eps[0] != defaultEtcdSecure {
		t.Errorf("the default endpoint with TLS: %v, %v; want %s", eps, err, defaultEtcdSecure)
	}
	if _, err := secureEndpoints([]string{"http://10.0.0.1:2379"}, true); err == nil || !strings.Contains(err.Error(), "https://10.0.0.1:2379") {
		t.Errorf("a plain endpoint with certificates: %v; want a usage error naming the https URL", err)
	}
	if eps, err := secureEndpoints([]string{"http://10.0.0.1:2379"}, false); err != nil || eps[0] != "http://10.0.0.1:2379" {
		t.Errorf("a plain endpoint without TLS changed: %v, %v", eps, err)
	}

	dir := filepath.Join(t.TempDir(), "pki")
	ca, err := pki.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.Issue("user:alice", pki.Client)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		f    tlsFlags
		want string
	}{
		"no certificate for the identity": {tlsFlags{dir: dir}, "no certificate for user:admin"},
		"a cert without its key":          {tlsFlags{cacert: p.CA, cert: p.Cert}, "give both or neither"},
		"a missing CA file":               {tlsFlags{cacert: filepath.Join(dir, "nope.crt")}, "--cacert"},
	} {
		if _, _, err := tc.f.resolve("user:admin", true, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", name, err, tc.want)
		}
	}
	cfg, id, err := (&tlsFlags{dir: dir, identity: "user:alice"}).resolve("user:admin", true, false)
	if err != nil || cfg == nil || id != "user:alice" || len(cfg.Certificates) != 1 {
		t.Errorf("--tls-dir --identity user:alice: %v, %q, %v", cfg != nil, id, err)
	}
}
