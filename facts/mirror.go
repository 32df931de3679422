package facts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// Change is one fact that changed at a revision. For a delete, Deleted is set
// and Fact holds the last value the mirror had (ModRevision is the delete's).
type Change struct {
	Fact
	Deleted bool
}

// Batch is the set of changes the mirror applied at one step, in revision
// order. Rev is the mirror's revision after the batch; Relist is set when the
// batch is the difference found by a relist (after a compaction or a broken watch).
type Batch struct {
	Rev     int64
	Changes []Change
	Relist  bool
}

// entry is a fact as the mirror keeps it. An update replaces the entry; only
// typ may be filled in later, when a plugin type for its key is registered.
type entry struct {
	Fact
	typ *FactType // nil for a key no fact type matches
}

func less(a, b *entry) bool { return a.Key < b.Key }

type varIndexKey struct {
	typ *FactType
	pos int    // variable position; -1 indexes the value
	val string // segment, or the value's string form
}

// Mirror is an in-memory copy of every fact under the store's root, kept
// current by a watch. It lists at revision R, watches from R+1 and applies
// events in revision order; on compaction or a broken watch it relists and
// emits the difference, so no change is ever silently missed.
//
// Reads take a consistent view with View; writes happen only in Run.
type Mirror struct {
	store  *Store
	schema *Schema
	log    *slog.Logger

	mu     sync.RWMutex // guards everything below
	byKey  map[string]*entry
	tree   *btree.BTreeG[*entry]
	byType map[*FactType]map[string]*entry
	idx    map[varIndexKey]map[string]*entry
	rev    int64
	synced bool
	subs   []*Subscription
	stats  MirrorStats
}

// MirrorStats counts what the mirror has done.
type MirrorStats struct {
	Events  int64 // watch events applied
	Relists int64 // full relists, the first one included
	Untyped int64 // facts whose key matches no fact type (kept, not indexed)
}

// NewMirror returns an empty mirror of the store. Call Run to fill and follow it.
func NewMirror(s *Store, log *slog.Logger) *Mirror {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Mirror{
		store:  s,
		schema: s.Schema,
		log:    log,
		byKey:  map[string]*entry{},
		tree:   btree.NewG(32, less),
		byType: map[*FactType]map[string]*entry{},
		idx:    map[varIndexKey]map[string]*entry{},
	}
}

// Sync lists every fact once, so that the mirror is current as of now. Run
// calls it; call it first when the caller needs the facts before going on.
func (m *Mirror) Sync(ctx context.Context) error {
	facts, rev, err := m.store.List(ctx, "", 0)
	if err != nil {
		return err
	}
	m.applyRelist(facts, rev)
	return nil
}

// Run keeps the mirror current until ctx is done, and returns ctx.Err().
// It may be called again after it returns; it resumes from the mirror's revision.
func (m *Mirror) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		if !m.isSynced() {
			if err := m.Sync(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				m.log.Warn("mirror: relist failed; retrying", "err", err, "retry_in", backoff)
				if !sleep(ctx, backoff) {
					return ctx.Err()
				}
				backoff = min(backoff*2, 5*time.Second)
				continue
			}
		}
		err := m.watch(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		m.mu.Lock()
		m.synced = false // the next pass relists and emits the difference
		m.mu.Unlock()
		m.log.Warn("mirror: watch ended; relisting", "err", err, "rev", m.Rev())
		if !sleep(ctx, backoff) {
			return ctx.Err()
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
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

var errWatchClosed = errors.New("watch channel closed")

// watch follows the store from the mirror's revision until the watch breaks.
func (m *Mirror) watch(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wc := m.store.Watch(wctx, "", m.Rev()+1)
	for resp := range wc {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			return fmt.Errorf("watch from revision %d: compacted at %d", m.Rev()+1, resp.CompactRevision)
		}
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) == 0 {
			continue
		}
		changes := make([]Change, 0, len(resp.Events))
		for _, ev := range resp.Events {
			c := Change{Fact: Fact{Key: m.store.Rel(string(ev.Kv.Key)), Value: ev.Kv.Value,
				ModRevision: ev.Kv.ModRevision, CreateRevision: ev.Kv.CreateRevision}}
			if ev.Type == mvccpb.DELETE {
				c.Deleted = true
			}
			changes = append(changes, c)
		}
		m.applyEvents(changes, resp.Events[len(resp.Events)-1].Kv.ModRevision)
	}
	return errWatchClosed
}

// applyEvents applies watch events in order.
func (m *Mirror) applyEvents(changes []Change, rev int64) {
	m.mu.Lock()
	out := changes[:0:0]
	for _, c := range changes {
		if c.Deleted {
			old, ok := m.byKey[c.Key]
			if !ok {
				continue
			}
			m.remove(old)
			c.Value = old.Value
			c.CreateRevision = old.CreateRevision
		} else {
			m.insert(c.Fact)
		}
		out = append(out, c)
	}
	m.stats.Events += int64(len(changes))
	if rev > m.rev {
		m.rev = rev
	}
	m.publish(Batch{Rev: m.rev, Changes: out})
	m.mu.Unlock()
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
		if old, ok := m.byKey[f.Key]; ok && old.ModRevision == f.ModRevision {
			continue
		}
		m.insert(f)
		out = append(out, Change{Fact: f})
	}
	var gone []*entry
	for k, e := range m.byKey {
		if _, ok := seen[k]; !ok {
			gone = append(gone, e)
		}
	}
	for _, e := range gone {
		m.remove(e)
		c := Change{Fact: e.Fact, Deleted: true}
		c.ModRevision = rev
		out = append(out, c)
	}
	m.rev = rev
	m.synced = true
	m.stats.Relists++
	m.publish(Batch{Rev: rev, Changes: out, Relist: true})
}

// insert adds or replaces a fact. Callers hold mu.
func (m *Mirror) insert(f Fact) {
	if old, ok := m.byKey[f.Key]; ok {
		m.remove(old)
	}
	e := &entry{Fact: f}
	if k, err := m.schema.Parse(f.Key); err == nil {
		e.typ = k.Type
		if e.typ.Name == "schema" {
			m.registerPlugin(k.Args[0], f.Value)
		}
	} else {
		m.stats.Untyped++
	}
	m.byKey[f.Key] = e
	m.tree.ReplaceOrInsert(e)
	if e.typ != nil {
		m.index(e, true)
	}
}

func (m *Mirror) remove(e *entry) {
	delete(m.byKey, e.Key)
	m.tree.Delete(e)
	if e.typ != nil {
		m.index(e, false)
	} else {
		m.stats.Untyped--
	}
}

// registerPlugin registers a fact type read from schema/ and types the facts
// that were kept untyped until now. Callers hold mu.
func (m *Mirror) registerPlugin(name string, raw []byte) {
	if t, ok := m.schema.Type(name); ok && t.Builtin {
		return
	}
	if err := m.schema.RegisterFrom(name, raw); err != nil {
		m.log.Warn("mirror: bad fact type registration", "key", SchemaKey(name), "err", err)
		return
	}
	if m.stats.Untyped == 0 {
		return
	}
	var retype []*entry
	for _, e := range m.byKey {
		if e.typ == nil {
			retype = append(retype, e)
		}
	}
	for _, e := range retype {
		if k, err := m.schema.Parse(e.Key); err == nil {
			e.typ = k.Type
			m.stats.Untyped--
			m.index(e, true)
		}
	}
}

// index adds (or removes) e in the per-type set, the index of each variable
// after the first (the first is served by a prefix scan of the tree) and the
// value index for short string values.
func (m *Mirror) index(e *entry, add bool) {
	set := func(k varIndexKey) {
		s := m.idx[k]
		if add {
			if s == nil {
				s = map[string]*entry{}
				m.idx[k] = s
			}
			s[e.Key] = e
		} else if s != nil {
			delete(s, e.Key)
			if len(s) == 0 {
				delete(m.idx, k)
			}
		}
	}
	ts := m.byType[e.typ]
	if add {
		if ts == nil {
			ts = map[string]*entry{}
			m.byType[e.typ] = ts
		}
		ts[e.Key] = e
	} else if ts != nil {
		delete(ts, e.Key)
	}
	if len(e.typ.Vars) > 1 {
		parts := strings.Split(e.Key, "/")
		vi := 0
		for i, sg := range e.typ.Segments {
			if sg.Var == "" {
				continue
			}
			if vi > 0 {
				set(varIndexKey{e.typ, vi, parts[i]})
			}
			vi++
		}
	}
	if s, ok := stringValue(e.Value); ok {
		set(varIndexKey{e.typ, -1, s})
	}
}

// stringValue returns the content of a short JSON string without escapes.
func stringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || len(raw) > 130 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') >= 0 || bytes.IndexByte(in, '"') >= 0 {
		return "", false
	}
	return string(in), true
}

// StringValue is the string a JSON string fact holds, as the value index sees it.
func StringValue(raw []byte) (string, bool) { return stringValue(raw) }

// publish hands a batch to every subscriber. Callers hold mu.
func (m *Mirror) publish(b Batch) {
	if len(b.Changes) == 0 && !b.Relist {
		return
	}
	for _, s := range m.subs {
		s.push(b)
	}
}

// Rev is the revision the mirror reflects.
func (m *Mirror) Rev() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rev
}

// Stats returns counters and the number of facts.
func (m *Mirror) Stats() (MirrorStats, int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.stats, len(m.byKey)
}

// WaitRev blocks until the mirror has reached revision rev or ctx is done.
func (m *Mirror) WaitRev(ctx context.Context, rev int64) error {
	for {
		if m.Rev() >= rev {
			return nil
		}
		if !sleep(ctx, 2*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// View runs fn with a consistent read-only view of the mirror. fn must not
// keep the Reader, and must not call back into the mirror.
func (m *Mirror) View(fn func(r Reader)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	fn(mirrorReader{m})
}

// Reader reads facts. Every iteration stops early when fn returns false;
// keys are relative to the root.
type Reader interface {
	Rev() int64
	Len() int
	Get(key string) (Fact, bool)
	// Prefix visits the facts whose key starts with prefix, in key order.
	Prefix(prefix string, fn func(Fact) bool)
	// OfType visits every fact of a type, in no particular order.
	OfType(t *FactType, fn func(Fact) bool)
	// ByVar visits the facts of a type whose variable at position pos (in
	// FactType.Vars, pos >= 1) equals val. Position 0 is served by Prefix.
	ByVar(t *FactType, pos int, val string, fn func(Fact) bool)
	// ByValue visits the facts of a type whose value is the JSON string val.
	ByValue(t *FactType, val string, fn func(Fact) bool)
	CountOfType(t *FactType) int
}

type mirrorReader struct{ m *Mirror }

func (r mirrorReader) Rev() int64 { return r.m.rev }
func (r mirrorReader) Len() int   { return len(r.m.byKey) }

func (r mirrorReader) Get(key string) (Fact, bool) {
	e, ok := r.m.byKey[key]
	if !ok {
		return Fact{}, false
	}
	return e.Fact, true
}

func (r mirrorReader) Prefix(prefix string, fn func(Fact) bool) {
	r.m.tree.AscendGreaterOrEqual(&entry{Fact: Fact{Key: prefix}}, func(e *entry) bool {
		if !strings.HasPrefix(e.Key, prefix) {
			return false
		}
		return fn(e.Fact)
	})
}

func (r mirrorReader) OfType(t *FactType, fn func(Fact) bool) {
	for _, e := range r.m.byType[t] {
		if !fn(e.Fact) {
			return
		}
	}
}

func (r mirrorReader) CountOfType(t *FactType) int { return len(r.m.byType[t]) }

func (r mirrorReader) ByVar(t *FactType, pos int, val string, fn func(Fact) bool) {
	if pos < 1 {
		panic("facts: ByVar position 0 is served by Prefix")
	}
	for _, e := range r.m.idx[varIndexKey{t, pos, val}] {
		if !fn(e.Fact) {
			return
		}
	}
}

func (r mirrorReader) ByValue(t *FactType, val string, fn func(Fact) bool) {
	for _, e := range r.m.idx[varIndexKey{t, -1, val}] {
		if !fn(e.Fact) {
			return
		}
	}
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
