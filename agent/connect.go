package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Connect returns a store whose client connects in the background: unlike
// facts.Dial it does not fail when etcd is unreachable, because an agent
// must start, adopt its containers and keep them running while cut off.
func Connect(endpoints []string, root string) (*facts.Store, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("--etcd: no endpoints given")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		MaxCallSendMsgSize:   64 << 20,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("--etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	return facts.NewStore(cli, root, nil), nil
}
