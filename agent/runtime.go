package agent

import (
	"context"
	"time"
)

// Runtime runs the containers of one node. Implementations: agent/containerd
// (real containers) and agent/sim (in-memory, for simulated nodes).
//
// A runtime never restarts a container on its own: an exited container stays
// listed (Running false, with its exit status) until Stop removes it, so the
// agent can report it failed and leave replacement to the control plane.
type Runtime interface {
	// Start creates and starts the container of spec and returns its status
	// once it runs. The error says what failed (image, port, limits); no
	// container is left behind on error. Canceling ctx abandons the start.
	Start(ctx context.Context, spec Spec) (Status, error)
	// Stop stops the container of instance id gracefully (SIGTERM, then
	// SIGKILL after grace) and removes it. An unknown id is not an error.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// List returns every container the runtime manages for this node,
	// running or exited, with the spec it was started from. It is how an
	// agent restarted without etcd finds its containers again. The caller
	// does not modify the list: a runtime may return the same one again.
	List(ctx context.Context) ([]Status, error)
}

// Versioner is a Runtime that can tell when its List would differ: Version
// changes with every start, stop, exit and change of health. A node woken
// by its resync timer alone, with its placements and its runtime's version
// as at its last pass and that pass's report committed, leaves the pass
// out (node.run). The simulated runtime is one: 5,000 simulated nodes in
// one process listed and compared unchanged containers 2,200 times a
// second. Containerd's is not: a container's exit is found by listing.
type Versioner interface {
	Version() uint64
}

// Addresser is a Runtime that knows the address its node's instances are
// reached at (host networking): the agent registers it as
// observed/node/{id}/address unless NodeConfig.Address names one.
type Addresser interface {
	Address() string
}

// Spec is what the agent asks a runtime to run: one instance of a service,
// with the service's desired attributes resolved.
type Spec struct {
	ID      string     `json:"id"`               // instance id, e.g. a8f31
	Service string     `json:"service"`          // service name
	Image   string     `json:"image"`            // as the service names it, e.g. nginx:1.28
	CPU     float64    `json:"cpu,omitempty"`    // cores; 0 means no limit
	Memory  int64      `json:"memory,omitempty"` // bytes; 0 means no limit
	Ports   []int      `json:"ports,omitempty"`  // exposed ports, ascending
	Health  HealthSpec `json:"health"`
	Volume  string     `json:"volume,omitempty"` // the volume it mounts at /volumes/{volume}; "" for none
	// Command replaces the image's entrypoint and Args its arguments (the
	// image's own when empty); Env is added to the image's environment;
	// Labels are set on the container (a runtime's own labels win).
	Command []string          `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	// Digest is the service's spec_digest (of command, args, env and
	// labels) read with them: the agent reports it back, and the rollout
	// replaces an instance whose digest is not the service's any more.
	Digest string `json:"digest,omitempty"`
}

// HealthSpec is the service's health block.
type HealthSpec struct {
	Method   string        `json:"method,omitempty"` // GET, HEAD or TCP; "" when the service declares none
	Path     string        `json:"path,omitempty"`
	Interval time.Duration `json:"interval,omitempty"`
}

// Health values, as observed/instance/{id}/health holds them.
const (
	Healthy   = "healthy"
	Unhealthy = "unhealthy"
	Unknown   = "unknown"
)

// Status is what a runtime knows about one container.
type Status struct {
	Spec       Spec      // the spec it was started from
	Image      string    // the image it runs (resolved name)
	IP         string    // the address it is reachable at
	Running    bool      // false: the task exited (or never ran)
	ExitStatus uint32    // when !Running
	ExitReason string    // when !Running: a short human reason, if known
	StartedAt  time.Time // when its task started
	// Health is set by runtimes that know it themselves (sim); "" means the
	// agent probes the instance over the network.
	Health string
}
