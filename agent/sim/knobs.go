package sim

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
)

// Knobs turn a running simulated fleet from outside, through plugin facts
// the sim agent registers under schema/ and watches (Follow):
//
//	sim/service/{name}/load          a service's synthetic cpu load, in cores
//	sim/instance/{instance-id}/health the health an instance reports from now on
//
// A simulated container uses no cpu of its own: a service's synthetic load
// is shared evenly by its running simulated instances of the fleet, as a
// balanced service's would be. Adding instances lowers each one's share,
// which is what the autoscaler needs to converge.

// LoadFactType is the plugin fact type a simulated fleet follows: the
// synthetic load of a service, set while it runs (tests, demos):
//
//	sim/service/web/load = 2.5
const LoadFactType = "sim.service.load"

// LoadRegistration is what a sim agent registers under schema/sim.service.load.
var LoadRegistration = facts.Registration{Key: "sim/service/{name}/load", Type: "number",
	Min: func(v float64) *float64 { return &v }(0),
	Doc: "The synthetic cpu load of a service, in cores, shared by its running simulated instances."}

// LoadKey is the key of a service's synthetic load.
func LoadKey(service string) string { return "sim/service/" + service + "/load" }

// HealthFactType is the plugin fact type of an instance's simulated health:
//
//	sim/instance/a8f31/health = "unhealthy"
const HealthFactType = "sim.instance.health"

// HealthRegistration is what a sim agent registers under schema/sim.instance.health.
var HealthRegistration = facts.Registration{Key: "sim/instance/{instance-id}/health", Type: "enum",
	Enum: []string{agent.Healthy, agent.Unhealthy, agent.Unknown},
	Doc:  "The health a running simulated instance reports from now on, instead of the one drawn at its start."}

// HealthKey is the key of an instance's simulated health.
func HealthKey(id string) string { return "sim/instance/" + id + "/health" }

// SetHealth makes a running simulated instance report health h; "" goes back
// to the health drawn at its start.
func (f *Fleet) SetHealth(id, h string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.health == nil {
		f.health = map[string]string{}
	}
	defer f.healthGen.Add(1) // every node's list may differ now; under mu, once changed
	if h == "" {
		delete(f.health, id)
		return
	}
	f.health[id] = h
}

// SetLoad sets the synthetic load of a service, in cores; 0 or less removes it.
func (f *Fleet) SetLoad(service string, cores float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loads == nil {
		f.loads = map[string]float64{}
	}
	if cores <= 0 {
		delete(f.loads, service)
		return
	}
	f.loads[service] = cores
}

// shares returns each service's load per running instance across the fleet.
func (f *Fleet) shares() map[string]float64 {
	f.mu.Lock()
	loads := make(map[string]float64, len(f.loads))
	for s, l := range f.loads {
		loads[s] = l
	}
	nodes := make([]*runtime, 0, len(f.nodes))
	for _, r := range f.nodes {
		nodes = append(nodes, r)
	}
	f.mu.Unlock()
	running := map[string]int{}
	for _, r := range nodes {
		r.mu.Lock()
		for _, c := range r.ctrs {
			if c.Running {
				running[c.Spec.Service]++
			}
		}
		r.mu.Unlock()
	}
	out := map[string]float64{}
	for s, n := range running {
		out[s] = loads[s] / float64(n)
	}
	return out
}

var _ agent.Metered = (*runtime)(nil)

// Usage reports each running container's share of its service's load.
func (r *runtime) Usage(context.Context) ([]agent.Usage, error) {
	share := r.f.shares()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]agent.Usage, 0, len(r.ctrs))
	for _, c := range r.ctrs {
		if c.Running {
			out = append(out, agent.Usage{ID: c.Spec.ID, Service: c.Spec.Service, CPU: share[c.Spec.Service]})
		}
	}
	return out, nil
}

// Follow registers the knobs' fact types under schema/ and keeps the fleet's
// loads and health overrides equal to the sim/ facts until ctx is done. It
// follows them through a mirror of sim/ (facts.NewMirrorOf), which relists
// after a compaction or a broken watch and keeps the last known knobs
// meanwhile.
func (f *Fleet) Follow(ctx context.Context, store *facts.Store, log *slog.Logger) {
	f.knobs(store, log).run(ctx)
}

// RegisterOps registers the knobs' fact types under schema/.
func RegisterOps() facts.Txn {
	return facts.Txn{Ops: []facts.Op{
		facts.Put(facts.SchemaKey(LoadFactType), facts.EncodeRegistration(LoadRegistration)),
		facts.Put(facts.SchemaKey(HealthFactType), facts.EncodeRegistration(HealthRegistration)),
	}}
}

// loadType and healthType are the value types of the knobs, as registered: a value is
// checked against them on the way in, since a writer past the schema (a
// store that has not loaded the plugins, etcd itself) could put anything.
var loadType, healthType = registeredType(LoadRegistration), registeredType(HealthRegistration)

func registeredType(r facts.Registration) facts.ValueType {
	_, vt, err := facts.ParseRegistration(facts.EncodeRegistration(r))
	if err != nil {
		panic("sim: " + r.Key + ": " + err.Error()) // a constant of this file
	}
	return vt
}

// knobFollower applies a mirror of sim/ to a fleet. run may be called again
// after it returns: the mirror resumes from its revision.
type knobFollower struct {
	f      *Fleet
	store  *facts.Store
	log    *slog.Logger
	mirror *facts.Mirror
}

func (f *Fleet) knobs(store *facts.Store, log *slog.Logger) *knobFollower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &knobFollower{f: f, store: store, log: log, mirror: facts.NewMirrorOf(store, log, "sim/")}
}

func (k *knobFollower) run(ctx context.Context) {
	sub := k.mirror.Subscribe()
	defer sub.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _ = k.mirror.Run(ctx) })
	wg.Go(func() { k.register(ctx) })
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Ready():
			for _, b := range sub.Take() {
				for _, c := range b.Changes {
					if c.Deleted {
						k.apply(c.Key, nil)
					} else {
						k.apply(c.Key, c.Value)
					}
				}
			}
		}
	}
}

// register writes the knobs' registrations, retrying until it succeeds or
// ctx is done.
func (k *knobFollower) register(ctx context.Context) {
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		_, err := k.store.Commit(ctx, RegisterOps())
		if err == nil || access.IsDenied(err) {
			// Denied: the fleet's identity may not write schema/; an
			// admin registers the knobs (ccattler auth add node:{prefix}* does).
			return
		}
		if ctx.Err() != nil {
			return
		}
		k.log.Warn("register the sim/ knobs' fact types; retrying", "err", err, "retry_in", wait)
		if !facts.Sleep(ctx, wait) {
			return
		}
	}
}

// apply applies one sim/ fact; a nil value removes it. A value its
// registered type rejects is logged and changes nothing: the knob keeps its
// last good setting.
func (k *knobFollower) apply(key string, value []byte) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 || !(parts[1] == "service" && parts[3] == "load" || parts[1] == "instance" && parts[3] == "health") {
		if value != nil {
			k.log.Warn("ignoring a sim/ fact that is no knob", "key", key,
				"expected", "sim/service/{name}/load or sim/instance/{instance-id}/health")
		}
		return
	}
	vt := healthType
	if parts[1] == "service" {
		vt = loadType
	}
	var v any
	if value != nil {
		var err error
		if v, err = vt.Decode(value); err != nil {
			k.log.Warn("ignoring a bad sim/ knob value; keeping the last good one", "key", key,
				"value", facts.Shorten(value, 64), "err", err)
			return
		}
	}
	if parts[1] == "service" {
		cores, _ := v.(float64)
		k.f.SetLoad(parts[2], cores)
		return
	}
	h, _ := v.(string)
	k.f.SetHealth(parts[2], h)
}
