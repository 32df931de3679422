// Package pki is CCattler's certificate authority: a CA kept as two files in
// a directory, and the certificates it issues to principals. A principal's
// name is its certificate's Common Name, which etcd (--client-cert-auth)
// takes as the user name: no password is stored anywhere.
//
//	ca, _ := pki.Init(dir)                       // dir/ca.crt, dir/ca.key (0600)
//	paths, _ := ca.Issue("node:node-2", pki.Client) // dir/node:node-2.crt, .key
//	tlsCfg, _ := pki.ClientTLS(paths.CA, paths.Cert, paths.Key)
//
// Keys are ECDSA P-256 (crypto/ecdsa): small, fast to verify, and accepted
// by etcd's and Go's TLS stacks alike.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names inside a CA directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// Validity of what Init and Issue create.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 2 * 365 * 24 * time.Hour
)

// ErrNoCA is returned by Load when the directory holds no CA.
var ErrNoCA = errors.New("pki: no CA in the directory")

// Usage says what an issued certificate is for.
type Usage int

const (
	Client Usage = 1 << iota // authenticates to etcd as its Common Name
	Server                   // serves TLS (etcd's client and peer ports)
)

// CA is a loaded certificate authority.
type CA struct {
	Dir  string
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Paths are the files of one issued certificate.
type Paths struct {
	CA, Cert, Key string
}

// Init creates a CA in dir (made 0700 if missing). It refuses to overwrite an
// existing CA: every certificate it issued would stop being trusted.
func Init(dir string) (*CA, error) {
	if _, err := os.Stat(filepath.Join(dir, CACertFile)); err == nil {
		return nil, fmt.Errorf("pki: %s already holds a CA (%s); remove it first to start over", dir, CACertFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "ccattler CA", Organization: []string{"ccattler"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	if err := writeKey(filepath.Join(dir, CAKeyFile), key); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, CACertFile), "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Dir: dir, Cert: cert, key: key}, nil
}

// Load reads the CA of dir; ErrNoCA when there is none.
func Load(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w %s (create one with: ccattler certs init --dir %s)", ErrNoCA, dir, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", filepath.Join(dir, CACertFile), err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("pki: the CA's key: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", filepath.Join(dir, CAKeyFile), err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("pki: %s does not belong to %s", CAKeyFile, CACertFile)
	}
	return &CA{Dir: dir, Cert: cert, key: key}, nil
}

// LoadOrInit loads the CA of dir, creating one when there is none.
func LoadOrInit(dir string) (ca *CA, created bool, err error) {
	ca, err = Load(dir)
	if errors.Is(err, ErrNoCA) {
		ca, err = Init(dir)
		return ca, err == nil, err
	}
	return ca, false, err
}

// PathsOf are where Issue writes name's certificate in dir.
func PathsOf(dir, name string) Paths {
	return Paths{CA: filepath.Join(dir, CACertFile), Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key")}
}

// CheckName rejects a principal name that cannot be a file name or a
// certificate's Common Name.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("pki: empty name")
	case len(name) > 128:
		return fmt.Errorf("pki: name %.20q...: longer than 128 bytes", name)
	case name == "ca" || strings.HasPrefix(name, "."):
		return fmt.Errorf("pki: name %q is reserved", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune(":-_.*", r)) {
			return fmt.Errorf("pki: name %q: %q is not allowed (lowercase letters, digits and :-_.* only)", name, r)
		}
	}
	return nil
}

// Issue writes a certificate for name (its Common Name) and its key into the
// CA's directory, replacing any earlier one. hosts are the DNS names and IP
// addresses a Server certificate is valid for.
func (ca *CA) Issue(name string, usage Usage, hosts ...string) (Paths, error) {
	if err := CheckName(name); err != nil {
		return Paths{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Paths{}, fmt.Errorf("pki: generate key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"ccattler"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if usage&Client != 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if usage&Server != 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else if h != "" {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return Paths{}, fmt.Errorf("pki: issue %s: %w", name, err)
	}
	p := PathsOf(ca.Dir, name)
	if err := writeKey(p.Key, key); err != nil {
		return Paths{}, err
	}
	if err := writePEM(p.Cert, "CERTIFICATE", der, 0o644); err != nil {
		return Paths{}, err
	}
	return p, nil
}

// Ensure returns name's certificate in the CA's directory, issuing it when
// it is missing, unreadable, not signed by this CA, or expires within a
// tenth of its validity.
func (ca *CA) Ensure(name string, usage Usage, hosts ...string) (Paths, error) {
	p := PathsOf(ca.Dir, name)
	if raw, err := os.ReadFile(p.Cert); err == nil {
		if c, err := parseCert(raw); err == nil && c.CheckSignatureFrom(ca.Cert) == nil &&
			time.Until(c.NotAfter) > CertValidity/10 && coversHosts(c, hosts) {
			if _, err := tls.LoadX509KeyPair(p.Cert, p.Key); err == nil {
				return p, nil
			}
		}
	}
	return ca.Issue(name, usage, hosts...)
}

func coversHosts(c *x509.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if c.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// ClientTLS is the TLS configuration of a client that trusts caFile and
// authenticates with certFile and keyFile (either may be empty: the server
// is verified, no identity is presented).
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		raw, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--cacert %s: %w", caFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("--cert %q and --key %q: give both or neither", certFile, keyFile)
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert %s / --key %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// CommonName is the Common Name of the certificate in certFile.
func CommonName(certFile string) (string, error) {
	raw, err := os.ReadFile(certFile)
	if err != nil {
		return "", err
	}
	c, err := parseCert(raw)
	if err != nil {
		return "", fmt.Errorf("%s: %w", certFile, err)
	}
	return c.Subject.CommonName, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("pki: encode key: %w", err)
	}
	return writePEM(path, "PRIVATE KEY", der, 0o600)
}

// writePEM writes through a temporary file and a rename, so a crash never
// leaves half a certificate, and a key is never readable by others even for
// a moment.
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if err := pem.Encode(tmp, &pem.Block{Type: typ, Bytes: der}); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pki: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

func parseCert(raw []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(raw)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func parseKey(raw []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(raw)
	if b == nil {
		return nil, errors.New("no PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T key, expected ECDSA", k)
	}
	return ek, nil
}
