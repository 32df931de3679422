package agent

import (
	"context"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// holdLease keeps lease/node/{id} on an etcd lease of the configured TTL.
// When the lease is lost (expired while the agent was frozen or cut off, or
// revoked), it grants a new one and the node registers again: a new lease
// generation makes the next report rewrite every fact.
func (n *node) holdLease(ctx context.Context) {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		if !n.a.link.up.Load() {
			n.a.link.waitUp(ctx, n.a.cfg.Probe)
			continue
		}
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		id, err := n.a.cfg.Store.Grant(gctx, n.a.cfg.LeaseTTL)
		if err == nil {
			// The lease and the node's facts in one transaction: the node is
			// never seen alive without a lease.
			// An operator's "draining" outlives the agent's re-registrations.
			var cur facts.Fact
			var found bool
			if cur, found, err = n.a.cfg.Store.Get(gctx, facts.NodeState(n.cfg.ID)); err == nil {
				draining := found && string(cur.Value) == `"draining"`
				ops := []facts.Op{{Key: facts.Lease(n.cfg.ID), Value: []byte("{}"), Lease: id}}
				for k, v := range n.nodeFacts {
					if !(draining && k == facts.NodeState(n.cfg.ID)) {
						ops = append(ops, facts.Put(k, []byte(v)))
					}
				}
				// Guarded by the state read: a drain ordered meanwhile is not overwritten.
				_, err = n.a.cfg.Store.Commit(gctx, facts.Txn{If: []facts.Cond{{Key: facts.NodeState(n.cfg.ID), Rev: cur.ModRevision}}, Ops: ops})
				n.mu.Lock()
				n.draining = draining
				n.mu.Unlock()
			}
		}
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("take lease", "err", err, "retry_in", backoff)
			}
			facts.Sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 500 * time.Millisecond
		ch, err := n.a.cfg.Store.KeepAlive(ctx, id)
		if err != nil {
			n.log.Warn("keep lease alive", "err", err)
			continue
		}
		n.mu.Lock()
		n.lease = id
		n.leaseGen++
		n.mu.Unlock()
		n.poke()
		n.log.Info("holding lease", "lease", int64(id), "ttl", n.a.cfg.LeaseTTL)
		for range ch {
			// Each response is a renewal; the channel closes when the lease is gone.
		}
		n.mu.Lock()
		n.lease = 0
		n.mu.Unlock()
		if ctx.Err() == nil {
			n.log.Warn("lease lost; taking a new one and registering again", "lease", int64(id))
		}
	}
}
