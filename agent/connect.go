package agent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/facts"
)

// Connect returns a store whose client connects in the background
// (facts.Connect): unlike facts.Dial it does not fail when etcd is
// unreachable, because an agent must start, adopt its containers and keep
// them running while cut off.
func Connect(endpoints []string, root string) (*facts.Store, error) {
	return ConnectTLS(endpoints, root, nil)
}

// ConnectTLS is Connect over TLS: the client certificate of tlsCfg is the
// node's identity (node:{id}), which etcd authorizes to write its own
// reports and nothing that decides.
func ConnectTLS(endpoints []string, root string, tlsCfg *tls.Config) (*facts.Store, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("--etcd: no endpoints given")
	}
	s, err := facts.Connect(endpoints, root, nil, tlsCfg)
	if err != nil {
		return nil, fmt.Errorf("--etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	return s, nil
}
