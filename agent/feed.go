package agent

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// Feed is the one watch an agent process keeps on etcd: placement/instance/
// and desired/service/. Every node of the process (one real node, or
// thousands of simulated ones) subscribes to it by node id, so N simulated
// nodes cost one watch, not N (DESIGN §5, watch fan-out).
//
// The feed also reads observed/instance/{id}/service once for each instance
// placed on a subscribed node: an instance never changes service.
type Feed struct {
	store *facts.Store
	log   *slog.Logger

	resync chan struct{} // a request to relist (after a reconnect); buffered 1

	mu          sync.Mutex                   // guards everything below
	synced      bool                         // a list has succeeded at least once
	rev         int64                        // revision of the last list or event
	placements  map[string]string            // instance -> node
	byNode      map[string]map[string]bool   // node -> its instances
	services    map[string]map[string][]byte // service -> attribute path (e.g. "resources/cpu") -> raw value
	instService map[string]string            // instance -> service, for placed instances of subscribed nodes
	lookedUp    map[string]time.Time         // instance -> last failed service lookup
	subs        map[string]chan struct{}     // node -> change notification (buffered 1)
	badKeys     map[string]bool              // placement keys ignored as invalid, logged once each
}

// NewFeed returns a feed over store; call Run to fill it.
func NewFeed(store *facts.Store, log *slog.Logger) *Feed {
	return &Feed{
		store: store, log: log,
		resync:      make(chan struct{}, 1),
		placements:  map[string]string{},
		byNode:      map[string]map[string]bool{},
		services:    map[string]map[string][]byte{},
		instService: map[string]string{},
		lookedUp:    map[string]time.Time{},
		subs:        map[string]chan struct{}{},
		badKeys:     map[string]bool{},
	}
}

// Subscribe registers a node; the returned channel receives a value (coalesced)
// whenever something that node depends on changes, and after every relist.
func (f *Feed) Subscribe(node string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{}, 1)
	f.subs[node] = ch
	return ch
}

// Want is one instance placed on a node, with its spec as far as it is known.
type Want struct {
	Spec  Spec
	Ready bool   // the spec is complete: the instance can be started
	Err   string // the spec is invalid (e.g. a bad memory quantity): the instance cannot run
}

// Desired returns what is placed on node. ok is false until the feed has
// listed etcd once: a node must not act destructively on an empty feed.
func (f *Feed) Desired(node string) (map[string]Want, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced {
		return nil, false
	}
	out := make(map[string]Want, len(f.byNode[node]))
	for id := range f.byNode[node] {
		svc, ok := f.instService[id]
		if !ok {
			out[id] = Want{Spec: Spec{ID: id}}
			continue
		}
		out[id] = buildWant(id, svc, f.services[svc], f.store.Schema)
	}
	return out, true
}

// PlacedOn returns the node instance id is placed on ("" if none) and
// whether the feed knows (has listed at least once).
func (f *Feed) PlacedOn(id string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.placements[id], f.synced
}

// Resync asks the feed to relist etcd, e.g. after a reconnect.
func (f *Feed) Resync() {
	select {
	case f.resync <- struct{}{}:
	default:
	}
}

// Run lists and watches until ctx is done. A broken watch, a compaction or a
// resync request leads to a relist; the feed keeps its last known state
// meanwhile, so nodes keep acting on what etcd last said.
func (f *Feed) Run(ctx context.Context) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		rev, err := f.relist(ctx)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("list placements and services", "err", err, "retry_in", backoff)
			}
			facts.Sleep(ctx, backoff)
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		if err := f.watch(ctx, rev); err != nil && ctx.Err() == nil {
			f.log.Info("watch ended; relisting", "err", err)
		}
	}
}

func (f *Feed) relist(ctx context.Context) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pl, rev, err := f.store.List(lctx, "placement/instance/", 0)
	if err != nil {
		return 0, err
	}
	sv, _, err := f.store.List(lctx, "desired/service/", rev)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.placements = map[string]string{}
	f.byNode = map[string]map[string]bool{}
	f.services = map[string]map[string][]byte{}
	for _, p := range pl {
		f.applyLocked(p.Key, p.Value)
	}
	for _, s := range sv {
		f.applyLocked(s.Key, s.Value)
	}
	f.synced, f.rev = true, rev
	for _, ch := range f.subs {
		poke(ch)
	}
	f.mu.Unlock()
	f.log.Info("listed placements and services", "rev", rev, "placements", len(pl), "service_facts", len(sv))
	f.fillServices(ctx)
	return rev, nil
}

func (f *Feed) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wp := f.store.WatchChanges(wctx, "placement/instance/", rev+1)
	ws := f.store.WatchChanges(wctx, "desired/service/", rev+1)
	retry := time.NewTicker(5 * time.Second)
	defer retry.Stop()
	for {
		var resp facts.WatchResponse
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.resync:
			return nil
		case <-retry.C:
			f.fillServices(ctx)
			continue
		case resp, ok = <-wp:
		case resp, ok = <-ws:
		}
		if !ok {
			return errWatchClosed
		}
		if err := resp.Err; err != nil {
			return err
		}
		f.mu.Lock()
		for _, c := range resp.Changes {
			if c.Deleted {
				f.applyLocked(c.Key, nil)
			} else {
				f.applyLocked(c.Key, c.Value)
			}
		}
		f.rev = max(f.rev, resp.Rev)
		f.mu.Unlock()
		f.fillServices(ctx)
	}
}

// applyLocked applies one put (raw != nil) or delete and notifies the nodes it concerns.
func (f *Feed) applyLocked(key string, raw []byte) {
	if id, ok := strings.CutPrefix(key, "placement/instance/"); ok {
		if err := facts.CheckSegment("instance-id", id); err != nil {
			// Not a placement the scheduler makes: an instance under a key
			// no report could name. Ignored, and said once per key.
			if raw != nil && !f.badKeys[key] {
				if len(f.badKeys) < 10000 {
					f.badKeys[key] = true
				}
				f.log.Warn("ignoring a placement whose key is not a valid instance id", "key", key, "err", err)
			}
			return
		}
		old := f.placements[id]
		node := ""
		if raw != nil {
			node, _ = facts.StringValue(raw)
		}
		if old == node {
			return
		}
		if old != "" {
			delete(f.byNode[old], id)
			f.pokeLocked(old)
		}
		if node == "" {
			delete(f.placements, id)
			delete(f.instService, id)
			delete(f.lookedUp, id)
			return
		}
		f.placements[id] = node
		if f.byNode[node] == nil {
			f.byNode[node] = map[string]bool{}
		}
		f.byNode[node][id] = true
		f.pokeLocked(node)
		return
	}
	rest, ok := strings.CutPrefix(key, "desired/service/")
	if !ok {
		return
	}
	svc, attr, _ := strings.Cut(rest, "/")
	if raw == nil {
		if attr == "" {
			delete(f.services, svc)
		} else if m := f.services[svc]; m != nil {
			delete(m, attr)
		}
	} else {
		if f.services[svc] == nil {
			f.services[svc] = map[string][]byte{}
		}
		if attr != "" {
			f.services[svc][attr] = raw
		}
	}
	if !f.synced {
		return // a relist pokes everyone at its end
	}
	for id, node := range f.placements {
		if f.instService[id] == svc {
			f.pokeLocked(node)
		}
	}
}

func (f *Feed) pokeLocked(node string) {
	if ch, ok := f.subs[node]; ok {
		poke(ch)
	}
}

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// lookupBatch is the number of service lookups sent in one etcd transaction
// (etcd's default --max-txn-ops is 128).
const lookupBatch = 100

// fillServices reads observed/instance/{id}/service for placed instances of
// subscribed nodes whose service is not known yet. A lookup that found
// nothing is retried at most every 5 s, so a placement without a service
// costs one read per 5 s rather than one per event.
func (f *Feed) fillServices(ctx context.Context) {
	f.mu.Lock()
	var ids []string
	now := time.Now()
	for id, node := range f.placements {
		if _, ok := f.subs[node]; !ok {
			continue
		}
		if _, ok := f.instService[id]; ok {
			continue
		}
		if t, ok := f.lookedUp[id]; ok && now.Sub(t) < 5*time.Second {
			continue
		}
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for len(ids) > 0 && ctx.Err() == nil {
		n := min(len(ids), lookupBatch)
		batch := ids[:n]
		ids = ids[n:]
		keys := make([]string, len(batch))
		for i, id := range batch {
			keys[i] = facts.InstanceService(id)
		}
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := f.store.GetMany(gctx, keys)
		cancel()
		f.mu.Lock()
		for i, id := range batch {
			svc := ""
			if err == nil && got[i].Value != nil {
				svc, _ = facts.StringValue(got[i].Value)
			}
			if svc == "" {
				f.lookedUp[id] = now
				continue
			}
			delete(f.lookedUp, id)
			f.instService[id] = svc
			f.pokeLocked(f.placements[id])
		}
		f.mu.Unlock()
		if err != nil {
			f.log.Warn("read services of placed instances", "err", err)
			return
		}
	}
}

var errWatchClosed = errors.New("agent: watch channel closed")

// revision is the etcd revision the feed's state is as of.
func (f *Feed) revision() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}
