package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ccattler/ccattler/agent"
)

// Config shapes the simulated containers of a fleet.
type Config struct {
	StartDelay  time.Duration // how long a start takes
	FailureRate float64       // share of starts that fail, 0..1
	Unhealthy   float64       // share of started instances that report unhealthy, 0..1
	Range       netip.Prefix  // node addresses, placed by a hash of the node id; never dialled
	Seed        uint64        // seeds the failure and health draws, so a run can be replayed
	// HostNetwork makes the simulated nodes behave like containerd's: their
	// instances share the node's network, so a start fails when another
	// running instance of the node holds one of its ports, and the nodes
	// report network = "host" (the scheduler's port filter).
	HostNetwork bool
}

// NewConfig returns the defaults of `ccattler agent --runtime sim`.
func NewConfig() Config {
	return Config{StartDelay: 100 * time.Millisecond, Range: netip.MustParsePrefix("10.128.0.0/9"), Seed: 1}
}

// Validate names the first bad field by its flag.
func (c Config) Validate() error {
	switch {
	case c.StartDelay < 0:
		return fmt.Errorf("--sim-start-delay %s: expected a duration >= 0", c.StartDelay)
	case c.FailureRate < 0 || c.FailureRate > 1:
		return fmt.Errorf("--sim-failure-rate %g: expected a share from 0 to 1", c.FailureRate)
	case c.Unhealthy < 0 || c.Unhealthy > 1:
		return fmt.Errorf("--sim-unhealthy %g: expected a share from 0 to 1", c.Unhealthy)
	case !c.Range.IsValid() || !c.Range.Addr().Is4():
		return fmt.Errorf("--sim-ip-range %s: expected an IPv4 prefix such as 10.128.0.0/9", c.Range)
	}
	return nil
}

// Fleet is the shared state of every simulated node of a process: the
// random source and the nodes.
type Fleet struct {
	cfg Config

	mu     sync.Mutex // guards rng, nodes, loads and health
	rng    *rand.Rand
	nodes  map[string]*runtime
	loads  map[string]float64 // service -> synthetic cpu load in cores (knobs.go)
	health map[string]string  // instance -> health it reports instead of its drawn one (knobs.go)
	// healthGen grows with every change of health, under mu: every
	// node's list may differ (runtime.Version).
	healthGen atomic.Uint64
}

// NewFleet validates cfg and returns an empty fleet.
func NewFleet(cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Fleet{cfg: cfg,
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), nodes: map[string]*runtime{}}, nil
}

// Node returns the runtime of a simulated node, creating it once.
func (f *Fleet) Node(id string) agent.Runtime {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.nodes[id]; ok {
		return r
	}
	r := &runtime{f: f, at: map[string]int32{}, addr: f.addressOf(id)}
	f.nodes[id] = r
	return r
}

// addressOf places a node in the range by a hash of its id, so that nodes
// of different agent processes get different addresses (as far as the
// range allows), and one node the same address after a restart.
func (f *Fleet) addressOf(id string) netip.Addr {
	h := fnv.New64a()
	h.Write([]byte(id))
	base := f.cfg.Range.Masked().Addr().As4()
	size := uint64(1) << (32 - f.cfg.Range.Bits())
	if size < 4 {
		return f.cfg.Range.Masked().Addr()
	}
	n := binary.BigEndian.Uint32(base[:]) + 1 + uint32(h.Sum64()%(size-2)) // neither the network's nor the broadcast address
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return netip.AddrFrom4(b)
}

// Exit makes a running simulated container exit with the given status, as
// if its process had died. It reports whether the container existed.
func (f *Fleet) Exit(node, id string, status uint32) bool {
	f.mu.Lock()
	r := f.nodes[node]
	f.mu.Unlock()
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.at[id]
	if !ok {
		return false
	}
	r.own()
	c := &r.ctrs[i]
	c.Running, c.ExitStatus, c.ExitReason = false, status, fmt.Sprintf("process exited with status %d", status)
	r.ver.Add(1)
	return true
}

// draw returns whether a start fails or is unhealthy.
func (f *Fleet) draw() (fail, unhealthy bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fail = f.rng.Float64() < f.cfg.FailureRate
	unhealthy = f.rng.Float64() < f.cfg.Unhealthy
	return fail, unhealthy && !fail
}

// runtime is the in-memory runtime of one simulated node.
type runtime struct {
	f    *Fleet
	addr netip.Addr // the node's address; its instances report it
	mu   sync.Mutex // guards the fields below
	// ctrs are the node's containers in no order, at[id] the position of
	// one. List hands ctrs itself out (shared): the next change copies
	// them first, so that a list once returned never changes under its
	// holder, and a node keeps one copy of its containers, not two.
	ctrs   []agent.Status
	at     map[string]int32
	shared bool
	ver    atomic.Uint64 // grows with every change of ctrs (Version)

	// listedAt is the Version List last answered at, and listed what it
	// returned if a health knob of the fleet was set then: a copy with
	// the knobs' health (nil: it returned ctrs).
	listed   []agent.Status
	listedAt uint64
}

// own makes ctrs the runtime's alone before a change, copying them if
// List handed them out, with room for the starts that may follow before
// the next List: one copy per List of a node of 30,000, not one per
// regrowth. Under mu.
func (r *runtime) own() {
	if r.shared {
		n := len(r.ctrs)
		r.ctrs, r.shared = append(make([]agent.Status, 0, n+n/8+4), r.ctrs...), false
	}
}

var (
	_ agent.Runtime   = (*runtime)(nil)
	_ agent.Addresser = (*runtime)(nil)
	_ agent.Versioner = (*runtime)(nil)
)

// Address is the node's address: its instances report it.
func (r *runtime) Address() string { return r.addr.String() }

// UnhealthyImage marks an image whose simulated instances always report
// unhealthy (e.g. "web:2-unhealthy"): how tests roll out a bad version.
const UnhealthyImage = "unhealthy"

// UnpullableImage marks an image that cannot be pulled (e.g.
// "web:2-unpullable"): every start of it fails, as a misspelt tag does.
const UnpullableImage = "unpullable"

// ErrStartFailed is the simulated failure of a start.
var ErrStartFailed = errors.New("sim: simulated start failure")

// HostNetwork reports whether the fleet's nodes share their network with
// their instances (Config.HostNetwork).
func (f *Fleet) HostNetwork() bool { return f.cfg.HostNetwork }

func (r *runtime) Start(ctx context.Context, sp agent.Spec) (agent.Status, error) {
	if d := r.f.cfg.StartDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return agent.Status{}, ctx.Err()
		case <-t.C:
		}
	}
	if strings.Contains(sp.Image, UnpullableImage) {
		return agent.Status{}, fmt.Errorf("sim: image %s is not imported and could not be pulled (simulated)", sp.Image)
	}
	fail, unhealthy := r.f.draw()
	if fail {
		return agent.Status{}, ErrStartFailed
	}
	st := agent.Status{Spec: sp, Image: sp.Image, IP: r.addr.String(), Running: true,
		StartedAt: time.Now().UTC(), Health: agent.Healthy}
	if unhealthy || strings.Contains(sp.Image, UnhealthyImage) {
		st.Health = agent.Unhealthy
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.at[sp.ID]; ok {
		return agent.Status{}, fmt.Errorf("sim: instance %s already has a container", sp.ID)
	}
	if r.f.cfg.HostNetwork { // a port is taken on the whole node
		for _, c := range r.ctrs {
			if !c.Running {
				continue
			}
			for _, p := range c.Spec.Ports {
				if slices.Contains(sp.Ports, p) {
					return agent.Status{}, fmt.Errorf("port %d is already used by instance %s on this node (host networking)", p, c.Spec.ID)
				}
			}
		}
	}
	r.own()
	r.at[sp.ID] = int32(len(r.ctrs))
	r.ctrs = append(r.ctrs, st)
	r.ver.Add(1)
	return st, nil
}

func (r *runtime) Stop(_ context.Context, id string, _ time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.at[id]
	if !ok {
		return nil
	}
	r.own()
	last := len(r.ctrs) - 1
	if int(i) != last {
		r.ctrs[i] = r.ctrs[last]
		r.at[r.ctrs[i].Spec.ID] = i
	}
	r.ctrs[last] = agent.Status{}
	r.ctrs = r.ctrs[:last]
	delete(r.at, id)
	r.ver.Add(1)
	return nil
}

var _ agent.Logged = (*runtime)(nil)

// OpenLog returns what a simulated container "wrote": one line saying what
// it was started with, so that `ccattler logs` can be tried without
// containerd.
func (r *runtime) OpenLog(id string) (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.at[id]
	if !ok {
		return nil, fmt.Errorf("sim: no container %s: %w", id, os.ErrNotExist)
	}
	c := r.ctrs[i]
	sp := c.Spec
	var env []string
	for _, k := range slices.Sorted(maps.Keys(sp.Env)) {
		env = append(env, k+"="+sp.Env[k])
	}
	line := fmt.Sprintf("sim: instance %s of %s started at %s: image %s command %q args %q env %q\n",
		sp.ID, sp.Service, c.StartedAt.Format(time.RFC3339), sp.Image, sp.Command, sp.Args, env)
	return io.NopCloser(strings.NewReader(line)), nil
}

// List returns the node's containers in no order, as agent.Runtime allows:
// sorting a node's tens of thousands at every reconcile was most of its
// cost. Until its Version changes it returns the same list again, which
// its callers do not modify: the runtime's own, unless a health knob is
// set.
func (r *runtime) List(context.Context) ([]agent.Status, error) {
	v := r.Version() // before the lock: a change meanwhile makes the next List build anew
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.listedAt == v { // unchanged since: the same answer, without the fleet's lock
		if r.listed != nil {
			return r.listed, nil
		}
		if r.shared {
			return r.ctrs, nil
		}
	}
	r.f.mu.Lock() // the health knobs; always taken after r.mu
	defer r.f.mu.Unlock()
	r.listedAt = v
	if len(r.f.health) == 0 {
		if !r.shared && cap(r.ctrs)-len(r.ctrs) > len(r.ctrs)/4+4 {
			// Handed out for as long as nothing changes (at rest, for
			// good): without the room appends left.
			r.ctrs = slices.Clone(r.ctrs)
		}
		r.listed, r.shared = nil, true
		return r.ctrs, nil
	}
	out := slices.Clone(r.ctrs)
	for i := range out {
		if h, ok := r.f.health[out[i].Spec.ID]; ok && out[i].Running {
			out[i].Health = h
		}
	}
	r.listed = out
	return out, nil
}

// Version changes whenever List would differ: with every start, stop and
// exit of the node's containers, and every health knob of the fleet.
// Each count grows under the lock of what it counts, once that changed.
func (r *runtime) Version() uint64 { return r.ver.Load() + r.f.healthGen.Load() }
