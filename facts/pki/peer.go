package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// Between two principals of the project (a CLI and a node's agent) there is
// no host name to verify: a node's address is what it reports, and a
// simulated fleet serves many nodes at one. What matters is who answers,
// and that is the Common Name of a certificate the project's CA signed,
// the same identity etcd knows it by. ServeMutual and DialMutual are the
// two ends of such a connection.

// ErrNoPeerCert is a connection whose peer presented no certificate.
var ErrNoPeerCert = errors.New("pki: the peer presented no certificate")

// ServeMutual is the server side: it serves with the certificate of
// client (the principal's own, from ClientTLS) and requires a client
// certificate signed by the CA client trusts. Who the client is, is its
// certificate's Common Name (PeerName); what it may do is the caller's.
func ServeMutual(client *tls.Config) (*tls.Config, error) {
	if client == nil || len(client.Certificates) == 0 || client.RootCAs == nil {
		return nil, errors.New("pki: serving mutual TLS needs a certificate, its key and the CA (--cacert/--cert/--key or --tls-dir)")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: client.Certificates,
		ClientCAs:    client.RootCAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}

// DialMutual is the client side: it presents client's certificate and
// accepts a server whose certificate the same CA signed and whose Common
// Name accept takes (nil: any principal of the CA). The server's
// certificate is that of a principal, not of a host: no host name is
// checked, the name is.
func DialMutual(client *tls.Config, accept func(cn string) error) (*tls.Config, error) {
	if client == nil || client.RootCAs == nil {
		return nil, errors.New("pki: dialing mutual TLS needs the CA (--cacert or --tls-dir)")
	}
	roots := client.RootCAs
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: client.Certificates,
		// The chain and the name are verified below, by VerifyConnection:
		// the default verification would ask for a host name.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return ErrNoPeerCert
			}
			leaf := cs.PeerCertificates[0]
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			// A principal's certificate may be for client use only
			// (ccattler certs issue without --server): any usage is taken,
			// the CA's signature and the name decide.
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
				return fmt.Errorf("pki: %q is not a principal of this cluster's CA: %w", leaf.Subject.CommonName, err)
			}
			if accept != nil {
				return accept(leaf.Subject.CommonName)
			}
			return nil
		},
	}, nil
}

// PeerName is the Common Name of the verified client certificate of a
// connection served with ServeMutual ("" when there is none).
func PeerName(cs *tls.ConnectionState) string {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	return cs.VerifiedChains[0][0].Subject.CommonName
}
