package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// feedPrefixes are what the feed mirrors: what a node principal may read
// of what decides what it runs (facts/access.Default).
var feedPrefixes = []string{"placement/instance/", "desired/service/"}

// Feed is the one watch an agent process keeps on etcd: a mirror
// (facts.NewMirrorOf) of placement/instance/ and desired/service/. Every
// node of the process (one real node, or thousands of simulated ones)
// subscribes to it by node id, so N simulated nodes cost one watch, not N
// (DESIGN §5, watch fan-out). The mirror lists, watches and relists after
// a compaction or a lost watch; the feed tells each node when something it
// depends on changed, and reads the facts from the mirror when the node asks.
//
// The feed also reads observed/instance/{id}/service once for each instance
// placed on a subscribed node: an instance never changes service.
type Feed struct {
	store     *facts.Store
	mirror    *facts.Mirror
	log       *slog.Logger
	placement *facts.FactType // placement/instance/{instance-id}, for the mirror's index by node

	mu          sync.Mutex               // guards everything below; taken inside a mirror View, never around one
	instService map[string]string        // instance -> service, for placed instances of subscribed nodes
	lookedUp    map[string]time.Time     // instance -> last failed service lookup
	subs        map[string]chan struct{} // node -> change notification (buffered 1)
	badKeys     map[string]bool          // placement keys ignored as invalid, logged once each
	// wants holds, by subscribed node, what Desired last built and the
	// node's poke count then: every change a node's wants depend on pokes
	// it (pokeLocked; a relist pokes all), so until the next poke the
	// result stands; it is rebuilt after wantsMaxAge all the same, should
	// a change ever miss its poke. A node reconciles every Resync whether
	// poked or not: 5,000 simulated nodes in one process rebuilt their
	// wants 2,500 times a second, a sixth of the large bench's CPU.
	wants map[string]nodeWants
	pokes map[string]uint64    // subscribed node -> times poked
	specs map[string]builtSpec // service -> its instances' Want as last built from its facts
	// svcGen counts, by service, the changes to its facts the feed has
	// applied: a spec built at the same count is built from the same facts.
	svcGen map[string]uint64
	// unfilled holds the subscribed nodes whose placements changed since
	// fillServices last looked (allUnfilled: every node, after a relist or
	// a failed lookup): it looks for instances of unknown service on those
	// alone, and not on every placement of every node after every batch,
	// which at 100,000 placements on 5,000 simulated nodes cost more than
	// the lookups.
	unfilled    map[string]bool
	allUnfilled bool
}

// builtSpec is a service's Want (Spec.ID empty) and the service's
// generation (Feed.svcGen) when it was built. Every instance of a service
// has its spec, but for the id: decoding the service's facts again for
// every instance in every reconcile of every node was most of what a
// simulated node allocated. The instances share its maps and slices, which
// nothing changes.
type builtSpec struct {
	gen  uint64
	want Want
}

// nodeWants is a node's wants as Desired built them, at, after pokes pokes.
type nodeWants struct {
	pokes uint64
	at    time.Time
	out   map[string]*Want
}

// wantsMaxAge is how long Desired returns wants it built without a poke.
var wantsMaxAge = 30 * time.Second // a variable for tests

// NewFeed returns a feed over store; call Run to fill it.
func NewFeed(store *facts.Store, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pt, ok := store.Schema.Type("placement.instance")
	if !ok {
		panic("agent: the schema has no placement.instance type") // a built-in of every schema
	}
	return &Feed{
		store: store, log: log, placement: pt,
		mirror:      facts.NewMirrorOf(store, log, feedPrefixes...),
		instService: map[string]string{},
		lookedUp:    map[string]time.Time{},
		subs:        map[string]chan struct{}{},
		badKeys:     map[string]bool{},
		wants:       map[string]nodeWants{},
		pokes:       map[string]uint64{},
		specs:       map[string]builtSpec{},
		svcGen:      map[string]uint64{},
		unfilled:    map[string]bool{},
	}
}

// Subscribe registers a node; the returned channel receives a value (coalesced)
// whenever something that node depends on changes, and after every relist.
func (f *Feed) Subscribe(node string) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{}, 1)
	f.subs[node] = ch
	f.unfilled[node] = true // placed before it subscribed
	return ch
}

// Want is one instance placed on a node, with its spec as far as it is known.
type Want struct {
	Spec  Spec
	Ready bool   // the spec is complete: the instance can be started
	Err   string // the spec is invalid (e.g. a bad memory quantity): the instance cannot run
}

// Desired returns what is placed on node; the caller must not modify the
// map or the Wants it points to. ok is false until the feed has listed
// etcd once: a node must not act destructively on an empty feed.
func (f *Feed) Desired(node string) (out map[string]*Want, ok bool) {
	f.mirror.View(func(r facts.Reader) {
		if r.Rev() == 0 {
			return
		}
		ok = true
		f.mu.Lock()
		defer f.mu.Unlock()
		_, subscribed := f.subs[node]
		now := time.Now()
		if w, kept := f.wants[node]; kept && subscribed && w.pokes == f.pokes[node] && now.Sub(w.at) < wantsMaxAge {
			out = w.out
			return
		}
		out = f.buildLocked(r, node)
		if subscribed {
			f.wants[node] = nodeWants{f.pokes[node], now, out}
		}
	})
	return out, ok
}

// pokesOf is how many times node was poked: its wants stand until this
// changes (Desired).
func (f *Feed) pokesOf(node string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pokes[node]
}

// buildLocked builds what is placed on node from r. f.mu is held. The
// Wants are made in one slice: a Want is over 128 bytes, so a map of them
// allocated each entry on its own, 30,000 allocations per rebuild of a
// node of 30,000 instances. A service's facts are looked at once per
// build, not once per instance.
func (f *Feed) buildLocked(r facts.Reader, node string) map[string]*Want {
	ids := placedOn(r, f.placement, node)
	ws := make([]Want, len(ids))
	out := make(map[string]*Want, len(ids))
	// Each service's Want, looked at once per build, as the first of its
	// instances holds it: a map of Wants (over 128 bytes) allocated each
	// one apart.
	svcs := map[string]*Want{}
	for i, id := range ids {
		if svc, known := f.instService[id]; known {
			if w, ok := svcs[svc]; ok {
				ws[i] = *w
			} else {
				ws[i] = f.serviceWantLocked(r, svc)
				svcs[svc] = &ws[i]
			}
		}
		ws[i].Spec.ID = id
		out[id] = &ws[i]
	}
	return out
}

// serviceWantLocked returns the Want of svc's instances, without their id:
// as last built while no batch has changed the service's facts since. A
// spec built from facts newer than the batches applied so far (the mirror
// is ahead of its subscription for a moment) is built again once the batch
// is applied: never one older than the facts past that.
func (f *Feed) serviceWantLocked(r facts.Reader, svc string) Want {
	gen := f.svcGen[svc]
	if b, ok := f.specs[svc]; ok && b.gen == gen {
		return b.want
	}
	attrs := serviceAttrs(r, svc)
	w := buildWant("", svc, attrs, f.store.Schema)
	if attrs == nil { // removed: its instances go too, and so does what was built
		delete(f.specs, svc)
		delete(f.svcGen, svc)
	} else {
		f.specs[svc] = builtSpec{gen: gen, want: w}
	}
	return w
}

// placedOn returns the instances placed on node, as the mirror's index of
// placements by value holds them: a key that is no instance id is not
// typed, so not indexed.
func placedOn(r facts.Reader, pt *facts.FactType, node string) []string {
	var ids []string
	r.ByValue(pt, node, func(p facts.Fact) bool {
		ids = append(ids, strings.TrimPrefix(p.Key, "placement/instance/"))
		return true
	})
	return ids
}

// serviceAttrs returns a service's attributes by path (e.g.
// "resources/cpu"), nil when the service has no fact at all.
func serviceAttrs(r facts.Reader, svc string) map[string][]byte {
	var out map[string][]byte
	if _, ok := r.Get(facts.DesiredService(svc)); ok {
		out = map[string][]byte{}
	}
	prefix := facts.DesiredService(svc) + "/"
	r.Prefix(prefix, func(a facts.Fact) bool {
		if out == nil {
			out = map[string][]byte{}
		}
		out[strings.TrimPrefix(a.Key, prefix)] = a.Value
		return true
	})
	return out
}

// PlacedOn returns the node instance id is placed on ("" if none) and
// whether the feed knows (has listed at least once).
func (f *Feed) PlacedOn(id string) (node string, known bool) {
	f.mirror.View(func(r facts.Reader) {
		known = r.Rev() > 0
		node = placementNode(r, id)
	})
	return node, known
}

// placementNode is the node of instance id's placement, "" when there is
// none or it is not one the scheduler makes (not an instance id, not a name).
func placementNode(r facts.Reader, id string) string {
	if facts.CheckSegment("instance-id", id) != nil {
		return ""
	}
	p, ok := r.Get(facts.Placement(id))
	if !ok {
		return ""
	}
	node, _ := facts.StringValue(p.Value)
	return node
}

// Resync asks the feed to relist etcd, e.g. after a reconnect.
func (f *Feed) Resync() { f.mirror.Resync() }

// Run follows etcd until ctx is done. The mirror relists after a broken
// watch, a compaction or a resync request, and keeps its last known state
// meanwhile, so nodes keep acting on what etcd last said.
func (f *Feed) Run(ctx context.Context) {
	sub := f.mirror.Subscribe()
	defer sub.Close()
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.mirror.Run(ctx) })
	defer wg.Wait()
	retry := time.NewTicker(5 * time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
		case <-sub.Ready():
			for _, b := range sub.Take() {
				f.apply(b)
			}
		}
		f.fillServices(ctx)
	}
}

// apply notifies the nodes a batch of the mirror concerns: after a relist
// every node, else the old and new node of a moved placement and the nodes
// running instances of a changed service.
func (f *Feed) apply(b facts.Batch) {
	var svcs map[string]bool
	f.mu.Lock()
	for _, c := range b.Changes {
		if id, ok := strings.CutPrefix(c.Key, "placement/instance/"); ok {
			f.placementChangedLocked(id, c, b.Relist)
			continue
		}
		if rest, ok := strings.CutPrefix(c.Key, "desired/service/"); ok && !b.Relist {
			svc, _, _ := strings.Cut(rest, "/")
			f.svcGen[svc]++
			if svcs == nil {
				svcs = map[string]bool{}
			}
			svcs[svc] = true
		}
	}
	if b.Relist {
		clear(f.specs) // services removed meanwhile came as no change
		f.allUnfilled = true
		for node := range f.subs {
			f.pokeLocked(node)
		}
	}
	f.mu.Unlock()
	if b.Relist {
		f.log.Info("listed placements and services", "rev", b.Rev, "changes", len(b.Changes))
	}
	if len(svcs) == 0 {
		return
	}
	f.mirror.View(func(r facts.Reader) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for svc := range svcs {
			if serviceAttrs(r, svc) == nil { // removed: nothing of it is kept
				delete(f.specs, svc)
				delete(f.svcGen, svc)
			}
		}
		for id, svc := range f.instService {
			if svcs[svc] {
				f.pokeLocked(placementNode(r, id))
			}
		}
	})
}

// placementChangedLocked pokes the nodes a placement change concerns and
// forgets the service of an instance no longer placed.
func (f *Feed) placementChangedLocked(id string, c facts.Change, relist bool) {
	if err := facts.CheckSegment("instance-id", id); err != nil {
		// Not a placement the scheduler makes: an instance under a key
		// no report could name. Ignored, and said once per key.
		if !c.Deleted && !f.badKeys[c.Key] {
			if len(f.badKeys) < 10000 {
				f.badKeys[c.Key] = true
			}
			f.log.Warn("ignoring a placement whose key is not a valid instance id", "key", c.Key, "err", err)
		}
		return
	}
	node := ""
	if !c.Deleted {
		node, _ = facts.StringValue(c.Value)
	}
	if _, served := f.subs[node]; node != "" && served {
		f.unfilled[node] = true
	} else {
		// Unplaced, or placed on a node this process does not serve:
		// nothing of it is kept (a node subscribing later looks again).
		delete(f.instService, id)
		delete(f.lookedUp, id)
	}
	if relist {
		return // every node is poked
	}
	if c.PrevKnown {
		if old, _ := facts.StringValue(c.Prev); old != node {
			f.pokeLocked(old)
		} else {
			return
		}
	}
	f.pokeLocked(node)
}

func (f *Feed) pokeLocked(node string) {
	if ch, ok := f.subs[node]; ok {
		f.pokes[node]++
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
// subscribed nodes whose service is not known yet: those on nodes whose
// placements changed since it last looked (unfilled), and those whose
// lookup found nothing. A lookup that found nothing is retried at most
// every 5 s, so a placement without a service costs one read per 5 s
// rather than one per event.
func (f *Feed) fillServices(ctx context.Context) {
	var ids []string
	now := time.Now()
	f.mirror.View(func(r facts.Reader) {
		f.mu.Lock()
		defer f.mu.Unlock()
		unknown := func(id string) bool {
			if _, ok := f.instService[id]; ok {
				return false
			}
			t, ok := f.lookedUp[id]
			return !ok || now.Sub(t) >= 5*time.Second
		}
		nodes := f.unfilled
		if f.allUnfilled {
			nodes = map[string]bool{}
			for node := range f.subs {
				nodes[node] = true
			}
		}
		for node := range nodes {
			if _, ok := f.subs[node]; !ok {
				continue
			}
			for _, id := range placedOn(r, f.placement, node) {
				if unknown(id) {
					ids = append(ids, id)
				}
			}
		}
		for id := range f.lookedUp { // found nothing before: looked up again in time
			node := placementNode(r, id)
			if _, ok := f.subs[node]; ok && !nodes[node] && unknown(id) {
				ids = append(ids, id)
			}
		}
		clear(f.unfilled)
		f.allUnfilled = false
	})
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
		f.mirror.View(func(r facts.Reader) {
			f.mu.Lock()
			defer f.mu.Unlock()
			for i, id := range batch {
				svc := ""
				if err == nil && got[i].Value != nil {
					svc, _ = facts.StringValue(got[i].Value)
				}
				if svc == "" {
					f.lookedUp[id] = now
					continue
				}
				node := placementNode(r, id)
				if node == "" {
					continue // unplaced while it was read: nothing to remember
				}
				delete(f.lookedUp, id)
				f.instService[id] = svc
				f.pokeLocked(node)
			}
		})
		if err != nil {
			f.log.Warn("read services of placed instances", "err", err)
			f.mu.Lock()
			f.allUnfilled = true // what was not read is looked for again
			f.mu.Unlock()
			return
		}
	}
}

// revision is the etcd revision the feed's state is as of.
func (f *Feed) revision() int64 { return f.mirror.Rev() }
