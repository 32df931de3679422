package facts

import (
	"crypto/tls"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Connect returns a store whose client connects in the background: unlike
// Dial it does not fail when etcd is unreachable, for a process that must
// start and keep working while cut off (an agent keeps its containers
// running). tlsCfg, when set, is used for every connection, as in
// StoreConfig.TLS; schema nil is Default.
func Connect(endpoints []string, root string, schema *Schema, tlsCfg *tls.Config) (*Store, error) {
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
		return nil, err
	}
	return NewStore(cli, root, schema), nil
}
