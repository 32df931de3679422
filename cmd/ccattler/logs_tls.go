package main

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/pki"
)

// logsServerTLS is the agent's log server configuration: HTTPS on the
// agent's own certificate (the one it connects to etcd with), requiring a
// client certificate of the same CA. nil (plain HTTP) when the agent
// connects without TLS: an insecure cluster has no identities to check.
func logsServerTLS(agentTLS *tls.Config) (*tls.Config, error) {
	if agentTLS == nil {
		return nil, nil
	}
	return pki.ServeMutual(agentTLS)
}

// logsClient is the HTTP client of `ccattler logs` for the agent of node:
// with the CLI's certificates when it has them, believing only a server
// whose certificate is node's (node:{node}, or a fleet's node:{prefix}*).
func logsClient(cliTLS *tls.Config, node string) (*http.Client, error) {
	if cliTLS == nil {
		return &http.Client{}, nil
	}
	cfg, err := pki.DialMutual(cliTLS, func(cn string) error {
		if !access.Speaks(cn, node) {
			return fmt.Errorf("the log server answers as %q, not as node %s", cn, node)
		}
		return nil
	})
	if err != nil {
		return nil, usageError("logs: %v", err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}, nil
}
