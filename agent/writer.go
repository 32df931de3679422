package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// writer groups the reports of every node of the process into few etcd
// transactions (group commit): a node's Write blocks until its operations
// are committed or failed, and concurrent writes share transactions of up to
// max operations.
type writer struct {
	store *facts.Store
	max   int
	reqs  chan *writeReq

	txns        atomic.Int64 // transactions committed
	ops         atomic.Int64 // operations committed
	commitNanos atomic.Int64 // time spent in transactions that committed
}

type writeReq struct {
	ops  []facts.Op
	done chan error // receives exactly one result
}

func newWriter(store *facts.Store, max int) *writer {
	return &writer{store: store, max: max, reqs: make(chan *writeReq, 1024)}
}

// Write commits ops (in chunks of at most max) and returns the first error.
// Every put must already be valid for the schema: one invalid put would fail
// the whole shared transaction.
func (w *writer) Write(ctx context.Context, ops []facts.Op) error {
	var reqs []*writeReq
	for len(ops) > 0 {
		n := min(len(ops), w.max)
		r := &writeReq{ops: ops[:n], done: make(chan error, 1)}
		ops = ops[n:]
		select {
		case w.reqs <- r:
			reqs = append(reqs, r)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var first error
	for _, r := range reqs {
		select {
		case err := <-r.done:
			if err != nil && first == nil {
				first = err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

// run commits queued requests until ctx is done.
func (w *writer) run(ctx context.Context) {
	var carry *writeReq
	for {
		var batch []*writeReq
		n := 0
		if carry != nil {
			batch, n, carry = append(batch, carry), len(carry.ops), nil
		} else {
			select {
			case <-ctx.Done():
				return
			case r := <-w.reqs:
				batch, n = append(batch, r), len(r.ops)
			}
		}
	fill:
		for n < w.max {
			select {
			case r := <-w.reqs:
				if n+len(r.ops) > w.max {
					carry = r
					break fill
				}
				batch, n = append(batch, r), n+len(r.ops)
			default:
				break fill
			}
		}
		ops := make([]facts.Op, 0, n)
		for _, r := range batch {
			ops = append(ops, r.ops...)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		began := time.Now()
		_, err := w.store.Commit(cctx, facts.Txn{Ops: ops})
		cancel()
		if err == nil {
			w.commitNanos.Add(int64(time.Since(began)))
			w.txns.Add(1)
			w.ops.Add(int64(len(ops)))
		}
		for _, r := range batch {
			r.done <- err
		}
	}
}

// link watches whether etcd answers. Each time it comes back after being
// unreachable, epoch grows: nodes then re-report everything and the feed
// relists, because anything may have happened meanwhile.
type link struct {
	store *facts.Store
	probe string // a key the agent may read: its own lease key
	up    atomic.Bool
	epoch atomic.Int64

	mu    sync.Mutex
	upped chan struct{} // closed when the link next comes up; nil when no one waits
}

// waitUp returns once the link is up, after at most d, or when ctx ends:
// a node takes its lease as soon as etcd first answers, not a probe
// interval after the agent started.
func (l *link) waitUp(ctx context.Context, d time.Duration) {
	l.mu.Lock()
	if l.upped == nil {
		l.upped = make(chan struct{})
	}
	ch := l.upped
	l.mu.Unlock()
	if l.up.Load() {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-ch:
	case <-t.C:
	}
}

// run probes etcd every interval while it answers. A probe refused or
// failed at once (a principal whose grants are still being written, an
// election under way) is tried again sooner, from 100 ms doubling up to
// the interval: the nodes take their leases, and report again, as soon as
// etcd lets them.
func (l *link) run(ctx context.Context, every time.Duration, onUp func()) {
	t := time.NewTimer(every)
	defer t.Stop()
	first := min(100*time.Millisecond, every)
	retry := first
	for {
		pctx, cancel := context.WithTimeout(ctx, every+time.Second)
		_, _, err := l.store.Get(pctx, l.probe)
		cancel()
		if ctx.Err() != nil {
			return
		}
		was := l.up.Swap(err == nil)
		if err == nil && !was {
			l.epoch.Add(1)
			l.mu.Lock()
			if l.upped != nil {
				close(l.upped)
				l.upped = nil
			}
			l.mu.Unlock()
			onUp()
		}
		next := every
		if err != nil {
			next, retry = retry, min(2*retry, every)
		} else {
			retry = first
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
