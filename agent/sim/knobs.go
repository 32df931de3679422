package sim

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"go.etcd.io/etcd/api/v3/mvccpb"
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
	if h == "" {
		delete(f.health, id)
		return
	}
	f.health[id] = h
}

func (f *Fleet) healthOverrides() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.health))
	for id, h := range f.health {
		out[id] = h
	}
	return out
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
	for id, c := range r.ctrs {
		if c.Running {
			out = append(out, agent.Usage{ID: id, Service: c.Spec.Service, CPU: share[c.Spec.Service]})
		}
	}
	return out, nil
}

// Follow registers the knobs' fact types under schema/ and keeps the fleet's
// loads and health overrides equal to the sim/ facts until ctx is done,
// listing again whenever the watch breaks.
func (f *Fleet) Follow(ctx context.Context, store *facts.Store, log *slog.Logger) {
	for ctx.Err() == nil {
		err := f.follow(ctx, store)
		if ctx.Err() != nil {
			return
		}
		log.Warn("follow the sim/ knobs; retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// RegisterOps registers the knobs' fact types under schema/.
func RegisterOps() facts.Txn {
	return facts.Txn{Ops: []facts.Op{
		facts.Put(facts.SchemaKey(LoadFactType), facts.EncodeRegistration(LoadRegistration)),
		facts.Put(facts.SchemaKey(HealthFactType), facts.EncodeRegistration(HealthRegistration)),
	}}
}

func (f *Fleet) follow(ctx context.Context, store *facts.Store) error {
	if _, err := store.Commit(ctx, RegisterOps()); err != nil && !access.IsDenied(err) {
		// Denied: the fleet's identity may not write schema/; an admin
		// registers the knobs (ccattler auth add node:{prefix}* does).
		return err
	}
	fs, rev, err := store.List(ctx, "sim/", 0)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.loads, f.health = map[string]float64{}, map[string]string{}
	f.mu.Unlock()
	for _, fa := range fs {
		f.apply(fa.Key, fa.Value)
	}
	for resp := range store.Watch(ctx, "sim/", rev+1) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			key := store.Rel(string(ev.Kv.Key))
			if ev.Type == mvccpb.DELETE {
				f.apply(key, nil)
				continue
			}
			f.apply(key, ev.Kv.Value)
		}
	}
	return errors.New("watch of sim/ ended")
}

// apply applies one sim/ fact; a nil value removes it. A value of the wrong
// type is ignored: the registered type rejects it when it is written through
// a store that knows the type.
func (f *Fleet) apply(key string, value []byte) {
	parts := strings.Split(key, "/")
	if len(parts) != 4 {
		return
	}
	switch {
	case parts[1] == "service" && parts[3] == "load":
		var v float64
		if value != nil && json.Unmarshal(value, &v) != nil {
			return
		}
		f.SetLoad(parts[2], v)
	case parts[1] == "instance" && parts[3] == "health":
		var h string
		if value != nil && json.Unmarshal(value, &h) != nil {
			return
		}
		f.SetHealth(parts[2], h)
	}
}
