package main

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// The typed rows are what `get -o json|yaml` prints, one shape per kind,
// documented in docs/cli.md: counts are numbers, cpu in cores, memory and
// sizes in bytes, times RFC 3339 in UTC; an absent fact is null (a number,
// a time) or "" (a name), never a missing field. A fact whose value breaks
// the schema is null too, and its key is listed under "invalid": the
// rules treat it as absent, and so does a script.

// record keeps a fact's raw value and the labels, beside the display value
// loadWorld keeps.
func (w *world) record(k facts.Key, f facts.Fact, bad bool) {
	if bad {
		w.bad = append(w.bad, f.Key)
		return
	}
	if len(k.Args) == 0 {
		return
	}
	if k.Type.Name == "desired.service.labels" {
		m := w.labels[k.Args[0]]
		if m == nil {
			m = map[string]string{}
			w.labels[k.Args[0]] = m
		}
		m[k.Args[1]] = display(f.Value)
		return
	}
	m := w.raw[k.Type.Name]
	if m == nil {
		m = map[string][]byte{}
		w.raw[k.Type.Name] = m
	}
	m[k.Args[0]] = f.Value
}

// invalidUnder lists the keys breaking the schema that describe the object
// whose facts live under the prefixes (each a key or a key and its tree).
func (w *world) invalidUnder(prefixes ...string) []string {
	var out []string
	for _, k := range w.bad {
		for _, p := range prefixes {
			if k == p || strings.HasPrefix(k, p+"/") {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

func (w *world) integer(factType, id string) *int64 {
	raw, ok := w.raw[factType][id]
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

func (w *world) cores(factType, id string) *float64 {
	raw, ok := w.raw[factType][id]
	if !ok {
		return nil
	}
	c, err := facts.ParseCPU(display(raw))
	if err != nil {
		return nil
	}
	return &c
}

func (w *world) byteSize(factType, id string) *int64 {
	raw, ok := w.raw[factType][id]
	if !ok {
		return nil
	}
	b, err := facts.ParseMemory(display(raw))
	if err != nil {
		return nil
	}
	return &b
}

func (w *world) instant(factType, id string) *time.Time {
	raw, ok := w.raw[factType][id]
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, display(raw))
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

func (w *world) boolean(factType, id string) *bool {
	raw, ok := w.raw[factType][id]
	if !ok {
		return nil
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return nil
	}
	return &b
}

// rolloutJSON is observed/service/{name}/rollout.
type rolloutJSON struct {
	State   string `json:"state"`
	Image   string `json:"image"`
	Updated int64  `json:"updated"`
	Total   int64  `json:"total"`
	Reason  string `json:"reason"`
}

// autoscaleJSON is a service's autoscaler: what it follows, its bounds,
// and its recommendation now (null before it made one).
type autoscaleJSON struct {
	Metric         string   `json:"metric"`
	Threshold      *float64 `json:"threshold"`
	Min            *int64   `json:"min"`
	Max            *int64   `json:"max"`
	Recommendation *int64   `json:"recommendation"`
}

type serviceJSON struct {
	Name      string            `json:"name"`
	Image     string            `json:"image"`
	Desired   *int64            `json:"desired"`
	Effective *int64            `json:"effective"`
	Target    *int64            `json:"target"` // effective, else desired
	Running   int               `json:"running"`
	Healthy   int               `json:"healthy"`
	Updated   int               `json:"updated"`
	Ports     []int             `json:"ports"`
	Labels    map[string]string `json:"labels"`
	CPU       *float64          `json:"cpu"`
	Memory    *int64            `json:"memory"`
	Rollout   *rolloutJSON      `json:"rollout"`
	Autoscale *autoscaleJSON    `json:"autoscale"`
	Status    string            `json:"status"`   // "failing", "unplaced" or ""
	Unplaced  int               `json:"unplaced"` // pending instances without a placement
	Failures  int64             `json:"failures"`
	Reason    string            `json:"reason"`
	Invalid   []string          `json:"invalid,omitempty"`
}

func (w *world) servicesJSON() []serviceJSON {
	rows := []serviceJSON{}
	counts := w.counts() // counted once: without summaries, a pass over every instance
	for _, r := range w.serviceRows(counts) {
		n := r.Name
		j := serviceJSON{Name: n, Image: r.Image, Desired: w.integer("desired.service.instances", n),
			Effective: w.integer("effective.service.instances", n), Running: r.Running, Healthy: r.Healthy,
			Ports: []int{}, Labels: map[string]string{}, CPU: w.cores("desired.service.resources.cpu", n),
			Memory: w.byteSize("desired.service.resources.memory", n), Status: r.Status, Reason: r.Reason, Unplaced: counts[n].Unplaced,
			Invalid: w.invalidUnder("desired/service/"+n, "effective/service/"+n, "observed/service/"+n)}
		j.Target = j.Effective
		if j.Target == nil {
			j.Target = j.Desired
		}
		j.Updated, _ = strconv.Atoi(strings.SplitN(r.Updated, "/", 2)[0])
		for _, p := range strings.Split(r.Ports, ",") {
			if port, err := strconv.Atoi(p); err == nil {
				j.Ports = append(j.Ports, port)
			}
		}
		for k, v := range w.labels[n] {
			j.Labels[k] = v
		}
		if raw, ok := w.raw["observed.service.rollout"][n]; ok {
			var ro rolloutJSON
			if json.Unmarshal(raw, &ro) == nil {
				j.Rollout = &ro
			}
		}
		if m := w.get("desired.service.autoscale.metric", n); m != "" {
			j.Autoscale = &autoscaleJSON{Metric: m, Threshold: w.cores("desired.service.autoscale.threshold", n),
				Min: w.integer("desired.service.autoscale.min", n), Max: w.integer("desired.service.autoscale.max", n),
				Recommendation: w.integer("observed.service.autoscale.recommendation", n)}
		}
		if r.Failures != "" {
			j.Failures, _ = strconv.ParseInt(r.Failures, 10, 64)
		}
		rows = append(rows, j)
	}
	return rows
}

type instanceJSON struct {
	ID         string     `json:"id"`
	Service    string     `json:"service"`
	Node       string     `json:"node"`
	State      string     `json:"state"`
	Health     string     `json:"health"`
	IP         string     `json:"ip"`
	Image      string     `json:"image"`
	StartedAt  *time.Time `json:"started_at"`
	AgeSeconds *int64     `json:"age_seconds"`
	CPU        *float64   `json:"cpu"`
	Memory     *int64     `json:"memory"`
	Reason     string     `json:"reason"`
	ExitStatus *int64     `json:"exit_status"`
	Invalid    []string   `json:"invalid,omitempty"`
}

func (w *world) instancesJSON(now time.Time) []instanceJSON {
	return w.instancesJSONOf(w.instances(now), now)
}

// instancesJSONOf is instancesJSON of the table's rows, insts.
func (w *world) instancesJSONOf(insts []instanceRow, now time.Time) []instanceJSON {
	rows := make([]instanceJSON, 0, len(insts))
	for _, r := range insts {
		j := instanceJSON{ID: r.ID, Service: r.Service, Node: r.Node, State: r.State, Health: r.Health, IP: r.IP,
			Image: r.Image, StartedAt: w.instant("observed.instance.started_at", r.ID),
			CPU: w.cores("observed.instance.resources.cpu", r.ID), Memory: w.byteSize("observed.instance.resources.memory", r.ID),
			Reason: w.get("observed.instance.reason", r.ID), ExitStatus: w.integer("observed.instance.exit_status", r.ID),
			Invalid: w.invalidUnder("observed/instance/"+r.ID, "placement/instance/"+r.ID)}
		if j.StartedAt != nil {
			age := int64(now.Sub(*j.StartedAt).Round(time.Second) / time.Second)
			j.AgeSeconds = &age
		}
		rows = append(rows, j)
	}
	return rows
}

// resourceJSON is a node's capacity and what its agent reports free.
type resourceJSON[T int64 | float64] struct {
	Capacity  *T `json:"capacity"`
	Available *T `json:"available"`
}

type nodeJSON struct {
	ID        string                `json:"id"`
	State     string                `json:"state"`
	Zone      string                `json:"zone"`
	Arch      string                `json:"arch"`
	Address   string                `json:"address"`
	CPU       resourceJSON[float64] `json:"cpu"`
	Memory    resourceJSON[int64]   `json:"memory"`
	Instances int                   `json:"instances"`
	Invalid   []string              `json:"invalid,omitempty"`
}

func (w *world) nodesJSON() []nodeJSON {
	rows := []nodeJSON{}
	for _, r := range w.nodes() {
		rows = append(rows, nodeJSON{ID: r.ID, State: r.State, Zone: r.Zone, Arch: r.Arch,
			Address:   w.get("observed.node.address", r.ID),
			CPU:       resourceJSON[float64]{w.cores("observed.node.capacity.cpu", r.ID), w.cores("observed.node.available.cpu", r.ID)},
			Memory:    resourceJSON[int64]{w.byteSize("observed.node.capacity.memory", r.ID), w.byteSize("observed.node.available.memory", r.ID)},
			Instances: r.Instances, Invalid: w.invalidUnder("observed/node/" + r.ID)})
	}
	return rows
}

type endpointJSON struct {
	Service  string   `json:"service"`
	Instance string   `json:"instance"`
	IP       string   `json:"ip"`
	Port     *int64   `json:"port"`
	Address  string   `json:"address"`
	Invalid  []string `json:"invalid,omitempty"`
}

func (w *world) endpointsJSON() []endpointJSON {
	rows := []endpointJSON{}
	for _, r := range w.endpoints() {
		j := endpointJSON{Service: r.Service, Instance: r.Instance, Address: r.Address,
			Invalid: w.invalidUnder(facts.Endpoint(r.Service, r.Instance))}
		if j.Invalid == nil {
			if host, port, err := splitHostPort(r.Address); err == nil {
				j.IP, j.Port = host, &port
			}
		}
		rows = append(rows, j)
	}
	return rows
}

type volumeJSON struct {
	Name         string   `json:"name"`
	Size         *int64   `json:"size"`
	Persistent   *bool    `json:"persistent"`
	AccessMode   string   `json:"access_mode"`
	AttachedNode string   `json:"attached_node"`
	State        string   `json:"state"`
	Invalid      []string `json:"invalid,omitempty"`
}

func (w *world) volumesJSON() []volumeJSON {
	rows := []volumeJSON{}
	for _, r := range w.volumes() {
		rows = append(rows, volumeJSON{Name: r.Name, Size: w.byteSize("desired.volume.size", r.Name),
			Persistent: w.boolean("desired.volume.persistent", r.Name), AccessMode: r.AccessMode,
			AttachedNode: r.AttachedNode, State: r.State,
			Invalid: w.invalidUnder("desired/volume/"+r.Name, "observed/volume/"+r.Name)})
	}
	return rows
}

// labelsOf returns a service's labels sorted as k=v, for the wide table.
func (w *world) labelsOf(service string) string {
	var out []string
	for k, v := range w.labels[service] {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}
