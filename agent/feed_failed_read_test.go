package agent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// A read of placed instances' services that fails (etcd refuses it, or
// does not answer) loses none of them: the instances are known as placed
// without a service meanwhile, looked for again at most every 5 s rather
// than on every event, and found once the reads work again, those the
// failed read never reached (past its first batch) too.
func TestFeedLooksAgainAfterAFailedRead(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	var failing atomic.Bool
	var refused atomic.Int64
	failing.Store(true)
	feedStore := refusingServiceReads(t, e, &failing, &refused)
	writeRaw(t, s, facts.DesiredService("web"), `{}`, facts.ServiceImage("web"), `"nginx:1.29"`)
	f := NewFeed(feedStore, nil)
	f.Subscribe("node-1")
	runFeed(t, f)

	// More than one batch of lookups (lookupBatch), placed on node-1 with
	// their services, in two transactions.
	const n = lookupBatch + 50
	want := map[string]string{}
	var kv []string
	for i := range n {
		id := fmt.Sprintf("a%04d", i)
		want[id] = "web:nginx:1.29"
		kv = append(kv, facts.Placement(id), `"node-1"`, facts.InstanceService(id), `"web"`)
		if len(kv) == n { // half the facts: the first transaction
			writeRaw(t, s, kv...)
			kv = nil
		}
	}
	writeRaw(t, s, kv...)
	eventually(t, func() string {
		got := desiredOn(f, "node-1")
		if len(got) != n || refused.Load() == 0 {
			return fmt.Sprintf("node-1 desires %d instances, want %d placed and not known yet; reads refused %d", len(got), n, refused.Load())
		}
		for id, w := range got {
			if w != ":" {
				return fmt.Sprintf("%s desired as %s while its service could not be read", id, w)
			}
		}
		return ""
	})
	// Refused, the reads are not tried again on every event: writes of
	// facts the feed follows (the service's spec) come by, the lookups
	// wait for their 5 s.
	before := refused.Load()
	for i := range 20 {
		writeRaw(t, s, facts.ServiceLabel("web", "round"), fmt.Sprintf(`"%d"`, i))
		time.Sleep(20 * time.Millisecond)
	}
	if extra := refused.Load() - before; extra > 2 {
		t.Errorf("20 writes while the reads failed caused %d more failed reads, want at most 2", extra)
	}

	failing.Store(false)
	eventually(t, func() string {
		if got := desiredOn(f, "node-1"); fmtMap(got) != fmtMap(want) {
			missing := 0
			for _, w := range got {
				if w == ":" {
					missing++
				}
			}
			return fmt.Sprintf("node-1 has %d of %d instances without their service once the reads work again", missing, n)
		}
		return ""
	})
	eventually(t, func() string {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.lookedUp) != 0 || f.allUnfilled {
			return fmt.Sprintf("after every service was found the feed still looks for %d instances (all nodes: %v)", len(f.lookedUp), f.allUnfilled)
		}
		return ""
	})
}

// refusingServiceReads dials e with a fake in front of the real etcd: a
// gRPC client interceptor that refuses, while failing is set, every
// transaction reading only instances' services (the feed's lookups) as
// etcd refuses a principal the keys, and counts them in refused.
func refusingServiceReads(t *testing.T, e *etcdtest.Etcd, failing *atomic.Bool, refused *atomic.Int64) *facts.Store {
	t.Helper()
	refuse := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*etcdserverpb.TxnRequest); ok && method == "/etcdserverpb.KV/Txn" && failing.Load() && readsServices(txn) {
			refused.Add(1)
			return rpctypes.ErrGRPCPermissionDenied
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	return e.StoreWith(t, grpc.WithChainUnaryInterceptor(refuse))
}

// readsServices reports whether txn only reads keys
// observed/instance/{id}/service.
func readsServices(txn *etcdserverpb.TxnRequest) bool {
	for _, op := range txn.Success {
		r := op.GetRequestRange()
		if r == nil || !strings.HasSuffix(string(r.Key), "/service") || !strings.Contains(string(r.Key), "/observed/instance/") {
			return false
		}
	}
	return len(txn.Success) > 0 && len(txn.Compare) == 0
}
