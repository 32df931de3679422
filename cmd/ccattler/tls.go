package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"

	"github.com/ccattler/ccattler/facts/pki"
)

// tlsFlags are the client side of the trust boundary, shared by every
// command: etcdctl's names for the three files, or a directory of
// certificates (`ccattler certs`) and the principal to be.
type tlsFlags struct {
	cacert, cert, key string
	dir, identity     string
}

// serverPKI is where `ccattler server` keeps its CA under its default
// --data-dir: a client run beside it finds its certificates there.
var serverPKI = filepath.Join("ccattler-data", "pki")

// defaultEtcd is the endpoint of a server on this machine.
const (
	defaultEtcdPlain  = "http://127.0.0.1:2379"
	defaultEtcdSecure = "https://127.0.0.1:2379"
)

// resolve returns the client TLS configuration the flags and environment
// name (nil: none), the principal it authenticates as, and whether it was
// found implicitly in the default server's data dir (when no --etcd is
// given, or only https endpoints). defaultIdentity is the principal a
// --tls-dir stands for unless --identity says otherwise.
func (t *tlsFlags) resolve(defaultIdentity string, etcdGiven, httpsOnly bool) (*tls.Config, string, error) {
	identity := t.identity
	if identity == "" {
		identity = defaultIdentity
	}
	cacert, cert, key := t.cacert, t.cert, t.key
	dir := t.dir
	if dir == "" && cacert == "" && cert == "" && (!etcdGiven || httpsOnly) {
		if _, err := os.Stat(filepath.Join(serverPKI, pki.CACertFile)); err == nil {
			dir = serverPKI
		}
	}
	if dir != "" {
		p := pki.PathsOf(dir, identity)
		if cacert == "" {
			cacert = p.CA
		}
		if cert == "" && key == "" {
			cert, key = p.Cert, p.Key
			if _, err := os.Stat(cert); err != nil {
				return nil, "", usageError("--tls-dir %s: no certificate for %s (%s); issue one with: ccattler certs issue --dir %s --name %s",
					dir, identity, cert, dir, identity)
			}
		}
	}
	if cacert == "" && cert == "" && key == "" {
		return nil, "", nil
	}
	cfg, err := pki.ClientTLS(cacert, cert, key)
	if err != nil {
		return nil, "", usageError("%v", err)
	}
	if cert != "" {
		if cn, err := pki.CommonName(cert); err == nil {
			identity = cn
		}
	}
	return cfg, identity, nil
}

// secureEndpoints turns the default plain endpoint into https when TLS is
// on, and refuses a plain one given with TLS material.
func secureEndpoints(eps []string, tlsOn bool) ([]string, error) {
	if !tlsOn {
		return eps, nil
	}
	out := make([]string, len(eps))
	for i, e := range eps {
		switch {
		case e == defaultEtcdPlain:
			e = defaultEtcdSecure
		case strings.HasPrefix(e, "http://"):
			return nil, usageError("--etcd %s: certificates are given (--cacert/--cert/--key or --tls-dir), so the endpoint is https://%s",
				e, strings.TrimPrefix(e, "http://"))
		}
		out[i] = e
	}
	return out, nil
}
