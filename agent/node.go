package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// node is one node of the process: it reconciles what is placed on it with
// what its runtime runs, and reports what is real.
//
// Partition rules: the node starts or stops containers only on what etcd
// said (the feed has listed at least once). Until then it works from its
// cache and only adopts: it never creates or kills a container for lack of
// etcd, and a corrupt cache changes nothing but a logged error and a reported
// node fact.
type node struct {
	a      *Agent
	cfg    NodeConfig
	log    *slog.Logger
	rt     Runtime
	notify <-chan struct{} // the feed's change notifications
	kick   chan struct{}   // a start, stop, probe or lease changed something; buffered 1
	path   string          // cache file; "" keeps no cache

	// Owned by the run goroutine.
	cached      map[string]*Want         // placements as last saved to (the feed's map then) or loaded from the cache
	cacheErr    string                   // why the cache could not be read; reported as observed/node/{id}/cache_error once etcd answers
	savedSum    [sha256.Size]byte        // of what the cache file holds, to skip rewriting it unchanged
	reported    map[string]reported      // key of one of the node's own facts -> what report last encoded and committed for it
	stated      map[string]instanceState // instance id -> what report last committed of it
	haveEpoch   int64                    // link epoch and lease generation reported's and stated's commits are valid for
	haveGen     int64
	listFailing bool              // the runtime's last List failed (logged once per outage)
	waiting     map[string]bool   // placed instances whose spec is incomplete (logged once each)
	nodeFacts   map[string]string // the node's own facts, encoded once

	mu sync.Mutex // guards the fields below; shared with start, stop and probe goroutines and Stats
	// wants is what is placed on the node: the feed's map, shared and
	// never modified, when live; built from the cache and what runs when not.
	wants map[string]*Want
	live  bool // wants came from etcd (not from the cache)
	// actual is what the runtime listed, by id, pointing into the list: a
	// map of 320-byte values rebuilt at every reconcile of a node of 30,000
	// instances was a third of what the node allocated.
	actual   map[string]*Status
	starting map[string]bool
	stopping map[string]bool
	stopped  map[string]bool // stopped because unplaced; reported "stopped" once, then forgotten
	failed   map[string]*failure
	health   map[string]string
	probes   map[string]probeHandle
	running  int
	draining bool // the node's state was "draining" at registration: the agent leaves it so
	lease    facts.LeaseID
	leaseGen int64 // grows with every new lease: the node re-registers and re-reports
}

// failure is an instance that will not run: reported "failed" with its
// reason, never restarted by the agent.
type failure struct {
	reason string
	exit   *uint32
}

func newNode(a *Agent, nc NodeConfig) *node {
	n := &node{
		a: a, cfg: nc, rt: nc.Runtime,
		log:      a.cfg.Log.With("node", nc.ID),
		kick:     make(chan struct{}, 1),
		reported: map[string]reported{}, stated: map[string]instanceState{}, waiting: map[string]bool{},
		starting: map[string]bool{}, stopping: map[string]bool{}, stopped: map[string]bool{},
		failed: map[string]*failure{}, health: map[string]string{}, probes: map[string]probeHandle{},
	}
	n.notify = a.feed.Subscribe(nc.ID)
	if a.cfg.StateDir != "" {
		n.path = cachePath(a.cfg.StateDir, nc.ID)
	}
	s := a.cfg.Store.Schema
	n.nodeFacts = map[string]string{}
	for k, v := range map[string]any{
		facts.Node(nc.ID):               map[string]any{},
		facts.NodeState(nc.ID):          "alive",
		facts.NodeCapacityCPU(nc.ID):    nc.CPU,
		facts.NodeCapacityMemory(nc.ID): nc.Memory,
		facts.NodeArchitecture(nc.ID):   nc.Architecture,
		facts.NodeZone(nc.ID):           nc.Zone,
	} {
		n.nodeFacts[k] = encodeNodeFact(s, k, v)
	}
	if nc.HostNetwork {
		n.nodeFacts[facts.NodeNetwork(nc.ID)] = encodeNodeFact(s, facts.NodeNetwork(nc.ID), "host")
	}
	if nc.LogsAddr != "" {
		n.nodeFacts[facts.NodeLogs(nc.ID)] = encodeNodeFact(s, facts.NodeLogs(nc.ID), nc.LogsAddr)
	}
	addr := nc.Address
	if a, ok := nc.Runtime.(Addresser); ok && addr == "" {
		addr = a.Address()
	}
	if addr != "" {
		raw, err := s.Encode(facts.NodeAddress(nc.ID), addr)
		if err != nil {
			n.log.Error("the node's address is not an IP address; not registered", "address", addr, "err", err)
		} else {
			n.nodeFacts[facts.NodeAddress(nc.ID)] = string(raw)
		}
	}
	return n
}

// encodeNodeFact encodes one of the node's own facts, which
// NodeConfig.Validate admits only valid values for.
func encodeNodeFact(s *facts.Schema, k string, v any) string {
	raw, err := s.Encode(k, v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

func (n *node) run(ctx context.Context) {
	n.loadCache()
	// Spread the simulated nodes' periodic work instead of waking them in step.
	every := n.a.cfg.Resync + time.Duration(rand.Int64N(int64(n.a.cfg.Resync)/4+1))
	t := time.NewTicker(every)
	defer t.Stop()
	var settled rest // what the last pass depended on, if it settled everything
	var settledAt time.Time
	for {
		before := n.restNow()
		n.reconcile(ctx)
		n.saveCache()
		if n.report(ctx) && before.set && n.idle() {
			settled, settledAt = before, time.Now()
		} else {
			settled = rest{}
		}
		if !n.wait(ctx, t.C, settled, settledAt) {
			n.stopProbes()
			return
		}
	}
}

// wait blocks until the node has a pass to make: the feed or a start,
// stop, probe or lease pokes it, or its timer fires and something the pass
// depends on changed since it settled (at), or restMaxAge passed. It
// returns false once ctx is done.
func (n *node) wait(ctx context.Context, tick <-chan time.Time, settled rest, at time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-n.notify:
			return true
		case <-n.kick:
			return true
		case <-tick:
			if !settled.set || n.restNow() != settled || time.Since(at) >= restMaxAge {
				return true
			}
		}
	}
}

// rest is what a node's pass depends on that can change without waking
// the node: its placements as the feed last told it (their poke count),
// its runtime's version, the link's epoch and the node's lease, and its
// registration's state. Everything else a pass reads changes inside a
// pass, or pokes the node.
type rest struct {
	wants    uint64
	runtime  uint64
	epoch    int64
	leaseGen int64
	lease    facts.LeaseID
	draining bool
	set      bool // false: the runtime cannot tell its version, and no pass is left out
}

// restMaxAge is how long a node woken by its timer alone leaves out its
// pass while nothing it depends on changed: as long as the feed keeps its
// wants without a poke (wantsMaxAge), should a change ever miss its poke.
var restMaxAge = wantsMaxAge

// restNow returns what the node's pass depends on now.
func (n *node) restNow() rest {
	v, ok := n.rt.(Versioner)
	if !ok {
		return rest{}
	}
	r := rest{wants: n.a.feed.pokesOf(n.cfg.ID), runtime: v.Version(), epoch: n.a.link.epoch.Load(), set: true}
	n.mu.Lock()
	r.leaseGen, r.lease, r.draining = n.leaseGen, n.lease, n.draining
	n.mu.Unlock()
	return r
}

// idle reports whether the node's wants came from etcd and no start or
// stop is under way: each pokes the node when it ends, but the pass after
// it must not be left out.
func (n *node) idle() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.starting) == 0 && len(n.stopping) == 0 && n.live
}

func (n *node) poke() { poke(n.kick) }

func (n *node) loadCache() {
	if n.path == "" {
		return
	}
	body, ok, err := loadCache(n.path)
	if err != nil {
		n.cacheErr = err.Error()
		n.log.Error("local cache unreadable; keeping every container as it is until etcd answers", "err", err)
		// Keep the bad file for inspection; the next good save replaces the cache.
		_ = os.Rename(n.path, n.path+".corrupt")
		return
	}
	if !ok {
		return
	}
	n.cached = make(map[string]*Want, len(body.Instances))
	for id, sp := range body.Instances {
		n.cached[id] = &Want{Spec: sp}
	}
	n.mu.Lock()
	for id, reason := range body.Failed {
		n.failed[id] = &failure{reason: reason}
	}
	n.mu.Unlock()
	n.log.Info("loaded local cache", "instances", len(body.Instances), "rev", body.Rev, "saved_at", body.SavedAt)
}

// saveCache rewrites the cache file when what it would hold changed; a
// node without one, or whose placements did not come from etcd, writes
// nothing and encodes nothing.
func (n *node) saveCache() {
	n.mu.Lock()
	if n.path == "" || !n.live {
		n.mu.Unlock()
		return
	}
	wants := n.wants
	body := cacheBody{Node: n.cfg.ID, Instances: make(map[string]Spec, len(wants)), Failed: map[string]string{}}
	for id, w := range wants {
		body.Instances[id] = w.Spec
	}
	for id, f := range n.failed {
		if _, placed := n.wants[id]; placed {
			body.Failed[id] = f.reason
		}
	}
	sig, _ := json.Marshal(body)
	n.mu.Unlock()
	// A sum, not the encoding: a node kept its placements' whole JSON
	// besides the feed's wants, a tenth of a simulated node's memory.
	sum := sha256.Sum256(sig)
	if sum == n.savedSum {
		return
	}
	body.Rev = n.a.feed.revision()
	body.SavedAt = time.Now().UTC()
	if err := saveCache(n.path, body, n.a.cfg.SyncCache); err != nil {
		n.log.Error("save local cache", "err", err)
		return
	}
	n.savedSum = sum
	n.cached = wants // the feed's map, never modified: no copy of the specs
}

// reconcile compares what is placed on the node with what runs, and starts
// and stops containers accordingly when etcd has spoken.
func (n *node) reconcile(ctx context.Context) {
	wants, live := n.a.feed.Desired(n.cfg.ID)
	// Containers whose start or stop is under way while the runtime lists
	// may be seen half made: their state in this list proves nothing.
	n.mu.Lock()
	busy := make(map[string]bool, len(n.starting)+len(n.stopping))
	for id := range n.starting {
		busy[id] = true
	}
	for id := range n.stopping {
		busy[id] = true
	}
	n.mu.Unlock()
	list, err := n.rt.List(ctx)
	if err != nil {
		if ctx.Err() == nil && !n.listFailing {
			n.log.Error("cannot list containers; changing nothing until the runtime answers", "err", err)
		}
		n.listFailing = true
		return
	}
	if n.listFailing {
		n.log.Info("the runtime answers again", "containers", len(list))
		n.listFailing = false
	}
	actual := make(map[string]*Status, len(list))
	for i := range list {
		actual[list[i].Spec.ID] = &list[i]
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	n.live = live
	if live {
		n.wants = wants
	} else {
		n.wants = maps.Clone(n.cached) // shared Wants, unmodified
		if n.wants == nil {
			n.wants = map[string]*Want{}
		}
		for id, st := range actual { // adopt what runs, cache or not
			if _, ok := n.wants[id]; !ok {
				n.wants[id] = &Want{Spec: st.Spec}
			}
		}
	}
	n.actual = actual
	n.running = 0
	for id, st := range actual {
		if st.Running {
			n.running++
			if st.Health == "" {
				n.ensureProbeLocked(ctx, id, st)
			}
			continue
		}
		n.stopProbeLocked(id)
		// A container being created has no task yet: not an exit.
		if _, placed := n.wants[id]; placed && n.failed[id] == nil && !n.starting[id] && !busy[id] {
			// The status copied apart: a pointer into st would keep the
			// whole list there for as long as the failure.
			exit := st.ExitStatus
			n.failLocked(id, st.ExitReason, &exit)
		}
	}
	if !live {
		return
	}
	// A start or stop busy when the list was taken may have finished since,
	// its container absent from the list or still in it: act on it only
	// after a list taken once it is done (it pokes the node when it is).
	for id, w := range wants {
		if _, ok := actual[id]; ok || busy[id] || n.starting[id] || n.stopping[id] || n.failed[id] != nil {
			continue
		}
		if w.Err != "" {
			n.failLocked(id, w.Err, nil)
			continue
		}
		if !w.Ready {
			if !n.waiting[id] { // said once, so that a wait is never silent
				n.waiting[id] = true
				n.log.Info("instance placed here waits for its service's facts (desired/service/{name}, its image)",
					"instance", id, "service", w.Spec.Service)
			}
			continue
		}
		delete(n.waiting, id)
		n.starting[id] = true
		go n.start(ctx, w.Spec)
	}
	for id := range actual {
		if _, placed := wants[id]; placed || busy[id] || n.stopping[id] {
			continue
		}
		n.stopping[id] = true
		n.stopProbeLocked(id)
		go n.stop(ctx, id)
	}
	for id := range n.waiting {
		if _, placed := wants[id]; !placed {
			delete(n.waiting, id)
		}
	}
	for id := range n.failed {
		if _, placed := wants[id]; !placed {
			if _, exists := actual[id]; !exists {
				delete(n.failed, id)
			}
		}
	}
}

func (n *node) failLocked(id, reason string, exit *uint32) {
	if reason == "" {
		reason = "container exited"
	}
	n.failed[id] = &failure{reason: reason, exit: exit}
	n.log.Warn("instance failed", "instance", id, "reason", reason)
}

func (n *node) start(ctx context.Context, sp Spec) {
	st, err := n.rt.Start(ctx, sp)
	n.mu.Lock()
	delete(n.starting, sp.ID)
	switch {
	case err != nil && ctx.Err() == nil:
		n.failLocked(sp.ID, "start: "+err.Error(), nil)
	case err == nil:
		n.log.Info("started instance", "instance", sp.ID, "service", sp.Service, "image", st.Image, "ip", st.IP)
	}
	n.mu.Unlock()
	n.poke()
}

func (n *node) stop(ctx context.Context, id string) {
	err := n.rt.Stop(ctx, id, n.a.cfg.Grace)
	n.mu.Lock()
	delete(n.stopping, id)
	if err != nil {
		if ctx.Err() == nil {
			n.log.Error("stop instance; will retry", "instance", id, "err", err)
		}
	} else {
		n.stopped[id] = true
		delete(n.failed, id)
		delete(n.health, id)
		n.log.Info("stopped instance: no longer placed here", "instance", id)
	}
	n.mu.Unlock()
	n.poke()
}
