package facts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Change is one fact that changed at a revision. For a delete, Deleted is set
// and Fact holds the last value the mirror had (ModRevision is the delete's).
type Change struct {
	Fact
	Deleted bool
	// Prev is what the fact held before the change (nil: nothing), when
	// PrevKnown: the mirror knows it for every watch event, not for the
	// differences a relist finds.
	Prev      []byte
	PrevKnown bool
}

// Batch is the set of changes the mirror applied at one step, in revision
// order. Rev is the mirror's revision after the batch; Relist is set when the
// batch is the difference found by a relist (after a compaction or a broken watch).
// Delivered is when the watch delivered the changes to this process (zero
// for a relist's): the mirror applies nothing while a View holds it, so a
// batch may be published well after its changes arrived.
type Batch struct {
	Rev       int64
	Changes   []Change
	Relist    bool
	Delivered time.Time
}

// Mirror is an in-memory copy of every fact under the store's root (or
// under some prefixes of it, NewMirrorOf), kept current by a watch. It lists
// at revision R, watches from R+1 and applies events in revision order; on
// compaction, a broken watch or a Resync it relists and emits the
// difference, so no change is ever silently missed.
//
// Reads take a consistent view with View; writes happen only in Run.
//
// A firing record (event/) is kept without its value: its key, revisions
// and lease only. No rule reads a record, the engine and `ccattler why`
// read records from etcd, and their values were most of the bytes the
// mirror held (2.4 KB a record against a few bytes for most facts; at
// 10,000 instances 76 of the 82 MB of keys and values). The changes it
// publishes carry the value as the watch delivered it.
type Mirror struct {
	store  *Store
	schema *Schema
	log    *slog.Logger
	// prefixes are what the mirror lists and watches, relative to the
	// root, none inside another: [""] for the whole root.
	prefixes []string
	// waiting counts batches from the watch waiting for mu to be applied
	// (Pending): a reader holding a View learns that the world moved on.
	waiting atomic.Int32
	resync  chan struct{} // a request to relist (Resync); buffered 1
	// backlog is the current watch's queue of answers (tests read its length).
	backlog atomic.Pointer[chan prefixResponse]

	mu     sync.RWMutex // guards everything below
	t      *Table
	synced bool
	// revs is, for each prefix, the revision its watch has delivered every
	// change up to. The table's revision is the lowest of them: the mirror
	// is current as of it under every prefix.
	revs  []int64
	subs  []*Subscription
	stats MirrorStats
	// progress asks the running watch to confirm the store's revision (nil
	// while no watch runs): writes outside the root move the revision
	// without an event the mirror would see.
	progress func()
}

// MirrorStats counts what the mirror has done.
type MirrorStats struct {
	Events  int64 // watch events applied
	Relists int64 // full relists, the first one included
	Untyped int64 // facts whose key matches no fact type (kept, not indexed)
	Invalid int64 // facts that break the schema (Fact.Invalid), untyped ones included: rules see them as absent
}

// NewMirror returns an empty mirror of the store. Call Run to fill and follow it.
func NewMirror(s *Store, log *slog.Logger) *Mirror { return NewMirrorOf(s, log, "") }

// NewMirrorOf returns an empty mirror of the facts under the given prefixes
// of the store (relative to the root; "", or none, is all of it), for a
// principal that may read only those: a node's agent follows
// placement/node/{node}/ and desired/service/. Each prefix is listed and
// watched on its own, all at one revision; a prefix inside another given
// one is dropped. Facts of other prefixes are absent from the mirror, not
// deleted.
func NewMirrorOf(s *Store, log *slog.Logger, prefixes ...string) *Mirror {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := NewTable(s.Schema)
	t.log = log
	ps := outermost(prefixes)
	return &Mirror{store: s, schema: s.Schema, log: log, t: t, prefixes: ps,
		revs: make([]int64, len(ps)), resync: make(chan struct{}, 1)}
}

// outermost returns the prefixes sorted, without those inside another:
// overlapping watches would deliver an event twice.
func outermost(prefixes []string) []string {
	ps := append([]string(nil), prefixes...)
	if len(ps) == 0 {
		ps = []string{""}
	}
	sort.Strings(ps)
	out := ps[:0]
	for _, p := range ps {
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue // sorted: a prefix of p comes before it
		}
		out = append(out, p)
	}
	return out
}

// Prefixes returns what the mirror follows, relative to the root ([""]: all of it).
func (m *Mirror) Prefixes() []string { return append([]string(nil), m.prefixes...) }

// Sync lists every fact once, so that the mirror is current as of now. Run
// calls it; call it first when the caller needs the facts before going on.
// Each prefix is read at the revision of the first, so that the mirror
// holds one revision of the store.
func (m *Mirror) Sync(ctx context.Context) error {
	var all []Fact
	var rev int64
	for _, p := range m.prefixes {
		fs, r, err := m.store.List(ctx, p, rev)
		if err != nil {
			return m.prefixErr("list", p, err)
		}
		rev = r
		all = append(all, fs...)
	}
	m.applyRelist(all, rev)
	return nil
}

// prefixErr says which prefix failed, and, when etcd refused, that the
// principal may not read it: a mirror of prefixes a principal's grants do
// not cover can never sync.
func (m *Mirror) prefixErr(op, prefix string, err error) error {
	if isDenied(err) {
		return fmt.Errorf("mirror: may not %s %q: the principal's grants (auth/{principal}/rules) do not cover it: %w", op, prefix, err)
	}
	return fmt.Errorf("mirror: %s %q: %w", op, prefix, err)
}

// isDenied reports whether etcd refused err's request for want of a
// permission. A refused watch comes back as the text of the server's
// status (clientv3 makes an error of its cancel reason), not as an
// EtcdError: that text is matched too.
func isDenied(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) ||
		strings.Contains(err.Error(), rpctypes.ErrPermissionDenied.Error())
}

// Resync asks the running mirror to relist now (e.g. after a reconnect):
// it emits the difference as after a compaction.
func (m *Mirror) Resync() {
	select {
	case m.resync <- struct{}{}:
	default:
	}
}

// Run keeps the mirror current until ctx is done, and returns ctx.Err().
// It may be called again after it returns; it resumes from the mirror's revision.
func (m *Mirror) Run(ctx context.Context) error {
	const first = 100 * time.Millisecond
	backoff := first
	for {
		if !m.isSynced() {
			if err := m.Sync(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				m.log.Warn("mirror: relist failed; retrying", "err", err, "retry_in", backoff)
				if !Sleep(ctx, backoff) {
					return ctx.Err()
				}
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
		}
		delivered, err := m.watch(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		m.mu.Lock()
		m.synced = false // the next pass relists and emits the difference
		m.mu.Unlock()
		if errors.Is(err, errResync) {
			continue
		}
		m.log.Warn("mirror: watch ended; relisting", "err", err, "rev", m.Rev())
		if delivered {
			// A watch that worked for a while broke: a new incident,
			// not a repeat of the last one.
			backoff = first
		}
		if !Sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// Sleep waits for d or until ctx is done, and reports whether the full time
// passed: the wait of every retry loop in the project.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (m *Mirror) isSynced() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.synced
}

var (
	errWatchClosed = errors.New("watch channel closed")
	errResync      = errors.New("resync requested")
)

// watchBacklog is how many watch answers the mirror holds while it waits
// to apply them: applyEvents takes them all under one lock.
const watchBacklog = 256

// prefixResponse is one watch answer of the prefix at index i; closed
// says its channel closed instead.
type prefixResponse struct {
	i      int
	resp   clientv3.WatchResponse
	closed bool
	at     time.Time // when the watch delivered it
}

// watch follows the store from the mirror's revisions until a watch breaks
// or a Resync asks for a relist. delivered reports whether any watch
// answered at all. Every prefix has its own watch, on one stream (one
// context), so that a progress request reaches them all.
func (m *Mirror) watch(ctx context.Context) (delivered bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := make(chan prefixResponse, watchBacklog)
	m.backlog.Store(&in)
	m.mu.RLock()
	from := append([]int64(nil), m.revs...)
	m.mu.RUnlock()
	for i, p := range m.prefixes {
		wc := m.store.Watch(wctx, p, from[i]+1)
		go func() {
			for resp := range wc {
				select {
				case in <- prefixResponse{i: i, resp: resp, at: time.Now()}:
				case <-wctx.Done():
					return
				}
			}
			select {
			case in <- prefixResponse{i: i, closed: true}:
			case <-wctx.Done():
			}
		}()
	}
	m.mu.Lock()
	m.progress = func() { _ = m.store.Client.RequestProgress(clientv3.WithRequireLeader(wctx)) }
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.progress = nil
		m.mu.Unlock()
	}()
	var next *prefixResponse // taken while draining the backlog, not applied with it
	for {
		var pr prefixResponse
		if next != nil {
			pr, next = *next, nil
		} else {
			select {
			case <-ctx.Done():
				return delivered, ctx.Err()
			case <-m.resync:
				return delivered, errResync
			case pr = <-in:
			}
		}
		p, resp := m.prefixes[pr.i], pr.resp
		if pr.closed {
			return delivered, fmt.Errorf("watch %q: %w", p, errWatchClosed)
		}
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return delivered, fmt.Errorf("watch %q from revision %d: compacted at %d", p, from[pr.i]+1, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return delivered, m.prefixErr("watch", p, err)
		}
		delivered = true
		if len(resp.Events) == 0 {
			if resp.IsProgressNotify() {
				m.advance(pr.i, resp.Header.Revision)
			}
			continue
		}
		next = m.applyEvents(pr, in)
	}
}

// plainEvents reports whether pr is an answer of events and nothing else:
// what applyEvents may apply while it drains the backlog.
func plainEvents(pr prefixResponse) bool {
	return !pr.closed && pr.resp.CompactRevision == 0 && pr.resp.Err() == nil && len(pr.resp.Events) > 0
}

// changesOf are the changes of one answer's events, the keys copied
// without the root (the table keeps them).
func (m *Mirror) changesOf(resp clientv3.WatchResponse) []Change {
	changes := make([]Change, 0, len(resp.Events))
	for _, ev := range resp.Events {
		c := Change{Fact: Fact{Key: string(bytes.TrimPrefix(ev.Kv.Key, []byte(m.store.Root))), Value: ev.Kv.Value,
			ModRevision: ev.Kv.ModRevision, CreateRevision: ev.Kv.CreateRevision, Lease: ev.Kv.Lease}}
		if ev.Type == mvccpb.DELETE {
			c.Deleted = true
		}
		changes = append(changes, c)
	}
	return changes
}

// kept is f as the mirror's table keeps it: a firing record without its
// value (Mirror).
func kept(f Fact) Fact {
	if IsRecord(f.Key) {
		f.Value = nil
	}
	return f
}

// setRevLocked records that prefix i's watch has delivered every change up
// to rev, and moves the table's revision to the lowest of the prefixes'.
func (m *Mirror) setRevLocked(i int, rev int64) {
	if rev > m.revs[i] {
		m.revs[i] = rev
	}
	low := m.revs[0]
	for _, r := range m.revs[1:] {
		low = min(low, r)
	}
	if low > m.t.rev {
		m.t.rev = low
	}
}

// applyEvents applies the events of first, and of every answer of events
// already waiting in in, in order, under one lock, and publishes each
// answer's as a batch stamped with when it was delivered. It returns an
// answer it took from in but did not apply (an error, a progress notice)
// for the watch loop to handle next.
func (m *Mirror) applyEvents(first prefixResponse, in <-chan prefixResponse) (next *prefixResponse) {
	firstChanges := m.changesOf(first.resp) // decoded before the lock
	m.waiting.Add(1)
	m.mu.Lock()
	m.waiting.Add(-1)
	defer m.mu.Unlock()
	apply := func(pr prefixResponse, changes []Change) {
		out := changes[:0]
		for _, c := range changes {
			if c.Deleted {
				old, ok := m.t.Delete(c.Key)
				if !ok {
					continue
				}
				c.Value = old.Value
				c.CreateRevision = old.CreateRevision
				c.Prev, c.PrevKnown = old.Value, true
			} else {
				if old, ok := m.t.byKey[c.Key]; ok {
					c.Prev = old.Value
				}
				c.PrevKnown = true
				m.t.Put(kept(c.Fact))
				c.Invalid = m.t.byKey[c.Key].Invalid
			}
			out = append(out, c)
		}
		m.stats.Events += int64(len(changes))
		m.setRevLocked(pr.i, pr.resp.Events[len(pr.resp.Events)-1].Kv.ModRevision)
		m.publish(Batch{Rev: m.t.rev, Changes: out, Delivered: pr.at})
	}
	apply(first, firstChanges)
	// What the watch delivered while this waited for the lock (a View
	// holds it for a whole engine round) is applied with it, not one
	// answer per lock: else a reader that takes the lock again at once
	// sees one answer of the backlog per view. Only what is queued now:
	// answers that keep coming must not keep readers out.
	for n := len(in); n > 0; n-- {
		pr := <-in
		if !plainEvents(pr) {
			next = &pr
			break
		}
		apply(pr, m.changesOf(pr.resp))
	}
	return next
}

// applyRelist replaces the mirror's content with a fresh list and publishes
// the difference.
func (m *Mirror) applyRelist(facts []Fact, rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Change
	seen := make(map[string]struct{}, len(facts))
	for _, f := range facts {
		seen[f.Key] = struct{}{}
		if old, ok := m.t.byKey[f.Key]; ok && old.ModRevision == f.ModRevision {
			continue
		}
		m.t.Put(kept(f))
		c := Change{Fact: f}
		c.Invalid = m.t.byKey[f.Key].Invalid
		out = append(out, c)
	}
	var gone []string
	for k := range m.t.byKey {
		if _, ok := seen[k]; !ok {
			gone = append(gone, k)
		}
	}
	sort.Strings(gone)
	for _, k := range gone {
		old, _ := m.t.Delete(k)
		c := Change{Fact: old, Deleted: true}
		c.ModRevision = rev
		out = append(out, c)
	}
	m.t.rev = rev
	for i := range m.revs {
		m.revs[i] = rev
	}
	m.synced = true
	m.stats.Relists++
	m.publish(Batch{Rev: rev, Changes: out, Relist: true})
}

// publish hands a batch to every subscriber. Callers hold mu.
func (m *Mirror) publish(b Batch) {
	if len(b.Changes) == 0 && !b.Relist {
		return
	}
	for _, s := range m.subs {
		s.push(b)
	}
}

// Rev is the revision the mirror reflects: it holds every change up to
// Rev under each prefix it follows (0 until the first list).
func (m *Mirror) Rev() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.t.rev
}

// Stats returns counters and the number of facts.
func (m *Mirror) Stats() (MirrorStats, int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	st := m.stats
	st.Untyped = int64(m.t.untyped)
	st.Invalid = int64(len(m.t.invalid))
	return st, len(m.t.byKey)
}

// advance records that prefix i's watch has delivered every change up to rev.
func (m *Mirror) advance(i int, rev int64) {
	m.mu.Lock()
	m.setRevLocked(i, rev)
	m.mu.Unlock()
}

// WaitRev blocks until the mirror has reached revision rev or ctx is done.
// When rev was reached by writes outside what the mirror follows, no event
// arrives to show it: after a short wait it asks the watches for a progress
// notification, which carries the store's revision.
func (m *Mirror) WaitRev(ctx context.Context, rev int64) error {
	for i := 1; ; i++ {
		if m.Rev() >= rev {
			return nil
		}
		if i%10 == 0 {
			m.mu.RLock()
			p := m.progress
			m.mu.RUnlock()
			if p != nil {
				p()
			}
		}
		if !Sleep(ctx, 2*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// Invalid returns the facts that break the schema, in key order, with
// Fact.Invalid saying why.
func (m *Mirror) Invalid() []Fact {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Fact
	m.t.Invalid(func(f Fact) bool { out = append(out, f); return true })
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Pending reports whether watch events are waiting to be applied: while
// a View runs, the mirror applies nothing, and an evaluation that could go
// on may rather end and take them. It takes no lock, so a View's fn may
// call it.
func (m *Mirror) Pending() bool { return m.waiting.Load() > 0 }

// View runs fn with a consistent read-only view of the mirror. fn must not
// keep the Reader, and must not call back into the mirror (but for Pending).
func (m *Mirror) View(fn func(r Reader)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	fn(m.t)
}

// Subscription receives the mirror's batches in order, without ever blocking
// the mirror: batches queue until read. mu guards queue.
type Subscription struct {
	m     *Mirror
	mu    sync.Mutex
	queue []Batch
	ready chan struct{} // has a token while queue is non-empty
}

// Subscribe returns a subscription that receives every batch applied after
// this call, starting at revision Rev().
func (m *Mirror) Subscribe() *Subscription {
	s := &Subscription{m: m, ready: make(chan struct{}, 1)}
	m.mu.Lock()
	m.subs = append(m.subs, s)
	m.mu.Unlock()
	return s
}

func (s *Subscription) push(b Batch) {
	s.mu.Lock()
	s.queue = append(s.queue, b)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Ready has a value whenever batches are waiting; then call Take.
func (s *Subscription) Ready() <-chan struct{} { return s.ready }

// Take returns the waiting batches, oldest first, and empties the queue.
func (s *Subscription) Take() []Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue = nil
	return q
}

// Close stops the subscription; batches after it are not queued.
func (s *Subscription) Close() {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.subs {
		if x == s {
			m.subs = append(m.subs[:i], m.subs[i+1:]...)
			break
		}
	}
}
