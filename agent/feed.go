package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// placementsOf is the prefix a feed mirrors the placements under: a
// process that runs one node watches that node's entries alone, one that
// runs many (simulated nodes) those under the longest prefix their ids
// share. That is also what a node principal may read: a fleet's
// (node:{prefix}*) grant of placement/node/{node}/ is
// placement/node/{prefix} (facts/access).
func placementsOf(nodes []string) string {
	switch len(nodes) {
	case 0:
		return "placement/node/"
	case 1:
		return facts.NodePlacements(nodes[0])
	}
	common := nodes[0]
	for _, n := range nodes[1:] {
		i := 0
		for i < len(common) && i < len(n) && common[i] == n[i] {
			i++
		}
		common = common[:i]
	}
	return "placement/node/" + common
}

// Feed is the one watch an agent process keeps on etcd: a mirror
// (facts.NewMirrorOf) of placement/node/ and desired/service/. Every node
// of the process (one real node, or thousands of simulated ones)
// subscribes to it by node id, so N simulated nodes cost one watch, not N;
// and a process of one node watches placement/node/{node}/ alone, so N real
// nodes receive their own placements, not N times every one (DESIGN §5,
// watch fan-out). An entry placement/node/{node}/{id} names the instance's
// service, as the engine wrote it with the placement (policies/scheduler.hcl).
// The mirror lists, watches and relists after a compaction or a lost
// watch; the feed tells each node when something it depends on changed,
// and reads the facts from the mirror when the node asks.
type Feed struct {
	store     *facts.Store
	mirror    *facts.Mirror
	log       *slog.Logger
	entryType *facts.FactType // placement/node/{node-id}/{instance-id}: the mirror's indexes of entries by instance and by service

	mu      sync.Mutex               // guards everything below; taken inside a mirror View, never around one
	subs    map[string]chan struct{} // node -> change notification (buffered 1)
	badKeys map[string]bool          // placement keys ignored as invalid, logged once each
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

// NewFeed returns a feed over store for the nodes the process runs (none
// given: any node may subscribe, and the feed watches every node's
// placements); call Run to fill it.
func NewFeed(store *facts.Store, log *slog.Logger, nodes ...string) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pt, ok := store.Schema.Type("placement.node")
	if !ok {
		panic("agent: the schema has no placement.node type") // a built-in of every schema
	}
	return &Feed{
		store: store, log: log, entryType: pt,
		mirror:  facts.NewMirrorOf(store, log, placementsOf(nodes), "desired/service/"),
		subs:    map[string]chan struct{}{},
		badKeys: map[string]bool{},
		wants:   map[string]nodeWants{},
		pokes:   map[string]uint64{},
		specs:   map[string]builtSpec{},
		svcGen:  map[string]uint64{},
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
	ps := placedOn(r, node)
	ws := make([]Want, len(ps))
	out := make(map[string]*Want, len(ps))
	// Each service's Want, looked at once per build, as the first of its
	// instances holds it: a map of Wants (over 128 bytes) allocated each
	// one apart.
	svcs := map[string]*Want{}
	for i, p := range ps {
		if w, ok := svcs[p.svc]; ok {
			ws[i] = *w
		} else {
			ws[i] = f.serviceWantLocked(r, p.svc)
			svcs[p.svc] = &ws[i]
		}
		ws[i].Spec.ID = p.id
		out[p.id] = &ws[i]
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

// placed is an instance placed on a node and its service, as the node's
// entry placement/node/{node}/{id} names it.
type placed struct{ id, svc string }

// placedOn returns the instances placed on node, from its entries. An
// entry that breaks the schema (an instance id or a service of no valid
// form: the mirror's table checks every fact, Fact.Invalid) is none;
// Feed.apply says so once.
func placedOn(r facts.Reader, node string) []placed {
	var out []placed
	prefix := facts.NodePlacements(node)
	r.Prefix(prefix, func(p facts.Fact) bool {
		if p.Invalid == "" {
			svc, _ := facts.StringValue(p.Value)
			out = append(out, placed{strings.TrimPrefix(p.Key, prefix), svc})
		}
		return true
	})
	return out
}

// entryNode is the node of a placement/node/{node}/... key.
func entryNode(key string) string {
	node, _, _ := strings.Cut(strings.TrimPrefix(key, "placement/node/"), "/")
	return node
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

// PlacedOn returns the node instance id is placed on as far as the feed
// sees ("" if none: not placed on any node whose entries it watches) and
// whether the feed knows (has listed at least once). A feed of one node
// sees that node's entries alone.
func (f *Feed) PlacedOn(id string) (node string, known bool) {
	f.mirror.View(func(r facts.Reader) {
		known = r.Rev() > 0
		r.ByVar(f.entryType, 1, id, func(p facts.Fact) bool {
			if p.Invalid == "" {
				node = entryNode(p.Key)
				return false
			}
			return true
		})
	})
	return node, known
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
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Ready():
			for _, b := range sub.Take() {
				f.apply(b)
			}
		}
	}
}

// apply notifies the nodes a batch of the mirror concerns: after a relist
// every node, else the node of an entry added or deleted and the nodes
// running instances of a changed service.
func (f *Feed) apply(b facts.Batch) {
	var svcs map[string]bool
	f.mu.Lock()
	for _, c := range b.Changes {
		if strings.HasPrefix(c.Key, "placement/node/") {
			f.entryChangedLocked(c, b.Relist)
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
			// The nodes with an instance of it: the mirror's entries by
			// value (the service), on subscribed nodes only.
			r.ByValue(f.entryType, svc, func(p facts.Fact) bool {
				if p.Invalid == "" {
					f.pokeLocked(entryNode(p.Key))
				}
				return true
			})
		}
	})
}

// entryChangedLocked pokes the node of an entry added, changed or deleted
// (its wants change, an entry of no valid form being no placement). An
// entry of no valid form is said once per key.
func (f *Feed) entryChangedLocked(c facts.Change, relist bool) {
	if !c.Deleted && c.Invalid != "" && !f.badKeys[c.Key] {
		if len(f.badKeys) < 10000 {
			f.badKeys[c.Key] = true
		}
		f.log.Warn("ignoring a placement entry of no valid form: expected placement/node/{node}/{instance-id} naming a service", "err", c.Invalid) // the reason names the key
	}
	if !relist { // a relist pokes every node
		f.pokeLocked(entryNode(c.Key))
	}
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

// revision is the etcd revision the feed's state is as of.
func (f *Feed) revision() int64 { return f.mirror.Rev() }
