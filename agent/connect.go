package agent

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Connect returns a store whose client connects in the background: unlike
// facts.Dial it does not fail when etcd is unreachable, because an agent
// must start, adopt its containers and keep them running while cut off.
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
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		MaxCallSendMsgSize:   64 << 20,
		Logger:               zap.NewNop(),
		TLS:                  tlsCfg,
		// Reconnect within ~2 s of etcd coming back rather than after gRPC's
		// default backoff (up to 2 minutes): a healed partition should be
		// reported as soon as possible.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("--etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	return facts.NewStore(cli, root, nil), nil
}
