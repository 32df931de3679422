package facts_test

import (
	"errors"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }
func contains(s, sub string) bool     { return strings.Contains(s, sub) }

func clientRequireSync() []clientv3.CompactOption {
	return []clientv3.CompactOption{clientv3.WithCompactPhysical()}
}
