package main

import (
	"context"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// tracker follows the mirror's batches and keeps just what the bench's
// conditions need: each instance's state, health and placement, the
// endpoints, the nodes' states and leases, and how many keys and revisions
// went by. A condition is checked after every batch, so the time it became
// true is the time the batch that made it true arrived, not the time a
// poll noticed.
type tracker struct {
	sub *facts.Subscription

	mu        sync.Mutex // guards everything below
	inst      map[string]*benchInst
	endpoints map[string]string // instance id -> service
	nodes     map[string]*benchNode
	states    map[string]int // instances by state
	ready     int            // instances running and healthy
	placed    int            // instances with a placement
	stoppedAt int            // instances with their stop noted (observed/instance/{id}/stopped_at)
	// The revisions that deleted a placement, by the instance's service:
	// the transactions a service's stops went in. Nil until a removal
	// phase starts counting.
	unplaced map[string]map[int64]bool
	keys     int64 // changes seen (puts and deletes)
	revs     int64 // distinct revisions seen: transactions under the root
	lastRev  int64
	waiters  []*waiter
	// watchKey's latest arrival time (the change phase's write).
	watchKey string
	watchAt  time.Time
}

type benchInst struct {
	state, health, node, service string
	stoppedAt                    bool
	// When the watch first delivered the instance's service, a placement
	// of it, it running healthy and its endpoint (Unix nanoseconds; 0: not
	// yet): where each instance's way waited (tracker.stages).
	created, placed, healthy, endpoint int64
}

func (i *benchInst) ready() bool { return i.state == "running" && i.health == "healthy" }

type benchNode struct {
	state string
	lease bool
}

// trackSnap is what the counters held when a condition became true.
type trackSnap struct {
	at         time.Time
	keys, revs int64
}

type waiter struct {
	cond func(t *tracker) bool
	done chan trackSnap
}

func newTracker(m *facts.Mirror) *tracker {
	return &tracker{sub: m.Subscribe(), inst: map[string]*benchInst{}, endpoints: map[string]string{},
		nodes: map[string]*benchNode{}, states: map[string]int{}}
}

// run applies batches until ctx is done.
func (t *tracker) run(ctx context.Context) {
	defer t.sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.sub.Ready():
		}
		bs := t.sub.Take()
		now := time.Now()
		t.mu.Lock()
		for _, b := range bs {
			at := b.Delivered // when etcd's answer arrived, not when the mirror could apply it
			if at.IsZero() {
				at = now
			}
			for _, c := range b.Changes {
				t.apply(c, at, now)
			}
		}
		kept := t.waiters[:0]
		for _, w := range t.waiters {
			if w.cond(t) {
				w.done <- trackSnap{at: now, keys: t.keys, revs: t.revs}
			} else {
				kept = append(kept, w)
			}
		}
		clear(t.waiters[len(kept):])
		t.waiters = kept
		t.mu.Unlock()
	}
}

// apply notes c, which the watch delivered at delivered and the tracker
// sees at now: instances' stages are stamped with the first, a watched
// key's change (in the mirror) with the second.
func (t *tracker) apply(c facts.Change, delivered, now time.Time) {
	t.keys++
	if c.ModRevision != t.lastRev {
		t.revs++
		t.lastRev = c.ModRevision
	}
	if c.Key == t.watchKey {
		t.watchAt = now
	}
	p := strings.Split(c.Key, "/")
	val := ""
	if !c.Deleted {
		val, _ = facts.StringValue(c.Value)
	}
	switch {
	case len(p) == 4 && p[0] == "observed" && p[1] == "instance" && (p[3] == "state" || p[3] == "health"):
		in := t.instance(p[2])
		was := in.ready()
		if p[3] == "state" {
			if in.state != "" {
				t.states[in.state]--
			}
			in.state = val
			if val != "" {
				t.states[val]++
			}
		} else {
			in.health = val
		}
		if is := in.ready(); is != was {
			if is {
				if in.healthy == 0 {
					in.healthy = delivered.UnixNano()
				}
				t.ready++
			} else {
				t.ready--
			}
		}
	case len(p) == 3 && p[0] == "placement" && p[1] == "instance":
		in := t.instance(p[2])
		switch {
		case in.node == "" && val != "":
			t.placed++
			if in.placed == 0 {
				in.placed = delivered.UnixNano()
			}
		case in.node != "" && val == "":
			t.placed--
		}
		if c.Deleted && t.unplaced != nil {
			if t.unplaced[in.service] == nil {
				t.unplaced[in.service] = map[int64]bool{}
			}
			t.unplaced[in.service][c.ModRevision] = true
		}
		in.node = val
	case len(p) == 4 && p[0] == "observed" && p[1] == "instance" && p[3] == "service":
		in := t.instance(p[2])
		in.service = val
		if in.created == 0 && val != "" {
			in.created = delivered.UnixNano()
		}
	case len(p) == 4 && p[0] == "observed" && p[1] == "instance" && p[3] == "stopped_at":
		in := t.instance(p[2])
		if in.stoppedAt != !c.Deleted {
			in.stoppedAt = !c.Deleted
			if in.stoppedAt {
				t.stoppedAt++
			} else {
				t.stoppedAt--
			}
		}
	case len(p) == 4 && p[0] == "endpoint" && p[1] == "service":
		if c.Deleted {
			delete(t.endpoints, p[3])
		} else {
			t.endpoints[p[3]] = p[2]
			if in := t.instance(p[3]); in.endpoint == 0 {
				in.endpoint = delivered.UnixNano()
			}
		}
	case len(p) == 4 && p[0] == "observed" && p[1] == "node" && p[3] == "state":
		t.node(p[2]).state = val
	case len(p) == 3 && p[0] == "lease" && p[1] == "node":
		t.node(p[2]).lease = !c.Deleted
	}
}

func (t *tracker) instance(id string) *benchInst {
	in := t.inst[id]
	if in == nil {
		in = &benchInst{}
		t.inst[id] = in
	}
	return in
}

func (t *tracker) node(id string) *benchNode {
	n := t.nodes[id]
	if n == nil {
		n = &benchNode{}
		t.nodes[id] = n
	}
	return n
}

// when returns a channel that receives the counters once cond holds after
// a batch (or at once, if it holds now). cond runs under the tracker's lock
// after every batch: it must be cheap and must not call back into t.
func (t *tracker) when(cond func(t *tracker) bool) <-chan trackSnap {
	w := &waiter{cond: cond, done: make(chan trackSnap, 1)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cond(t) {
		w.done <- trackSnap{at: time.Now(), keys: t.keys, revs: t.revs}
	} else {
		t.waiters = append(t.waiters, w)
	}
	return w.done
}

// read runs fn under the tracker's lock.
func (t *tracker) read(fn func(t *tracker)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t)
}

// counts returns the counters now.
func (t *tracker) counts() trackSnap {
	t.mu.Lock()
	defer t.mu.Unlock()
	return trackSnap{at: time.Now(), keys: t.keys, revs: t.revs}
}

// watch makes the tracker note when key next changes; watched returns that time.
func (t *tracker) watch(key string) {
	t.mu.Lock()
	t.watchKey, t.watchAt = key, time.Time{}
	t.mu.Unlock()
}

func (t *tracker) watched() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.watchAt
}

// nodesUp counts the nodes that are alive and hold their lease.
func (t *tracker) nodesUp() int {
	n := 0
	for _, nd := range t.nodes {
		if nd.state == "alive" && nd.lease {
			n++
		}
	}
	return n
}

// endpointsOn counts the endpoints of instances placed on the given nodes.
func (t *tracker) endpointsOn(nodes map[string]bool) int {
	n := 0
	for id := range t.endpoints {
		if in := t.inst[id]; in != nil && nodes[in.node] {
			n++
		}
	}
	return n
}

// trackProgress is what the bench's conditions count: while it does not
// change, no phase gets any nearer its end.
type trackProgress struct {
	placed, ready, stoppedAt, endpoints int
	pending, running, stopped           int
}

func (t *tracker) progress() trackProgress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return trackProgress{placed: t.placed, ready: t.ready, stoppedAt: t.stoppedAt, endpoints: len(t.endpoints),
		pending: t.states["pending"], running: t.states["running"], stopped: t.states["stopped"]}
}

// spread is how the scheduler spread what it placed, from the
// placements alone: the instances beyond an even spread of each service
// over the nodes (those on a node that already holds its service's share,
// ceil(instances/nodes)), and the instances per node, fewest and most,
// with their coefficient of variation (standard deviation ÷ mean). The
// bench's services all request the same, so an even count is the least
// allocated placement as well.
type spread struct {
	Excess   int
	Min, Max int
	CV       float64
}

// spread measures the placements now over every node the tracker knows,
// an empty one included.
func (t *tracker) spread() spread {
	perNode := make(map[string]int, len(t.nodes))
	for id := range t.nodes {
		perNode[id] = 0
	}
	type placed struct{ service, node string }
	together := map[placed]int{} // a service's instances on one node
	total := map[string]int{}    // a service's instances
	for _, in := range t.inst {
		if in.node != "" {
			perNode[in.node]++
			together[placed{in.service, in.node}]++
			total[in.service]++
		}
	}
	if len(perNode) == 0 {
		return spread{}
	}
	var s spread
	for p, n := range together {
		share := (total[p.service] + len(perNode) - 1) / len(perNode)
		s.Excess += max(0, n-share)
	}
	counts := slices.Collect(maps.Values(perNode))
	s.Min, s.Max = slices.Min(counts), slices.Max(counts)
	var sum, sq float64
	for _, n := range counts {
		sum += float64(n)
	}
	mean := sum / float64(len(counts))
	for _, n := range counts {
		sq += (float64(n) - mean) * (float64(n) - mean)
	}
	if mean > 0 {
		s.CV = math.Sqrt(sq/float64(len(counts))) / mean
	}
	return s
}

// stageLatency is how long instances took over one stage of their way
// from the apply to their endpoint, as the watch delivered the changes
// to the engine's process: the median, the 90th percentile and the
// longest.
type stageLatency struct {
	Stage string  `json:"stage"`
	P50   float64 `json:"p50_seconds"`
	P90   float64 `json:"p90_seconds"`
	Max   float64 `json:"max_seconds"`
}

// stages measures the way of every instance created since start that has
// its endpoint: from the apply to its creation (intent resolution and
// create_instances), to its placement (the scheduler), to its agent's
// report of it running healthy (the feed, the start, the report), to its
// endpoint. A stage long for most instances is where the pipeline waits.
func (t *tracker) stages(start time.Time) []stageLatency {
	names := []string{"apply → created", "created → placed", "placed → running healthy", "running healthy → endpoint"}
	d := make([][]int64, len(names))
	from := start.UnixNano()
	for _, in := range t.inst {
		if in.created < from || in.placed == 0 || in.healthy == 0 || in.endpoint == 0 {
			continue
		}
		at := [...]int64{from, in.created, in.placed, in.healthy, in.endpoint}
		for i := range names {
			d[i] = append(d[i], max(0, at[i+1]-at[i]))
		}
	}
	if len(d[0]) == 0 {
		return nil
	}
	out := make([]stageLatency, len(names))
	for i, name := range names {
		slices.Sort(d[i])
		q := func(f float64) float64 { return time.Duration(d[i][int(f*float64(len(d[i])-1))]).Seconds() }
		out[i] = stageLatency{Stage: name, P50: q(0.5), P90: q(0.9), Max: q(1)}
	}
	return out
}
