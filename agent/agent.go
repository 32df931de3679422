package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// Config is the configuration of one agent process, which runs one real node
// or many simulated ones. NewConfig gives the defaults; Validate names the
// first bad field by its command-line flag.
type Config struct {
	Store     *facts.Store  // need not be reachable at start: the agent works from its cache meanwhile
	StateDir  string        // --state-dir: where each node's cache lives; "" keeps no cache
	LeaseTTL  time.Duration // --lease-ttl
	Grace     time.Duration // --stop-grace: SIGTERM to SIGKILL
	Resync    time.Duration // how often a node reconciles without being told to
	Probe     time.Duration // how often the agent checks that etcd answers
	MaxBatch  int           // operations per etcd transaction (etcd's --max-txn-ops defaults to 128)
	SyncCache bool          // fsync cache files (real nodes); simulated nodes skip it
	Log       *slog.Logger
}

// NewConfig returns the defaults of `ccattler agent`.
func NewConfig() Config {
	return Config{
		LeaseTTL:  30 * time.Second,
		Grace:     10 * time.Second,
		Resync:    2 * time.Second,
		Probe:     2 * time.Second,
		MaxBatch:  128,
		SyncCache: true,
		Log:       slog.Default(),
	}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("agent: no fact store")
	case c.LeaseTTL < 2*time.Second:
		return fmt.Errorf("--lease-ttl %s: expected at least 2s (etcd's shortest lease)", c.LeaseTTL)
	case c.Grace < 0:
		return fmt.Errorf("--stop-grace %s: expected a duration >= 0", c.Grace)
	case c.Resync <= 0 || c.Probe <= 0:
		return errors.New("agent: resync and probe intervals must be positive")
	case c.MaxBatch < 1:
		return fmt.Errorf("agent: max batch %d: expected at least 1", c.MaxBatch)
	}
	if c.StateDir != "" {
		if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
			return fmt.Errorf("--state-dir %s: %w", c.StateDir, err)
		}
	}
	return nil
}

// NodeConfig describes one node the process runs.
type NodeConfig struct {
	ID           string  // --node-id
	CPU          float64 // --cpu: cores offered
	Memory       int64   // --memory: bytes offered
	Architecture string  // --architecture
	Zone         string  // --zone
	// Address is where the node's instances are reached (host networking);
	// "" takes the runtime's (Addresser: --advertise-address, a simulated
	// node's own). The agent registers it as observed/node/{id}/address,
	// and endpoints take it from there.
	Address string
	// HostNetwork says the node's instances share its network, so that a
	// port is taken on the whole node: reported as observed/node/{id}/network
	// = "host", which the scheduler's port filter reads.
	HostNetwork bool
	// LogsAddr is where the node serves its containers' output (host:port),
	// reported as observed/node/{id}/logs for `ccattler logs`; "" for none.
	LogsAddr string
	Runtime  Runtime
}

// Validate names the first bad field.
func (n NodeConfig) Validate() error {
	if err := facts.CheckSegment("node-id", n.ID); err != nil {
		return fmt.Errorf("--node-id: %w", err)
	}
	if n.CPU <= 0 {
		return fmt.Errorf("--cpu %g: expected a positive number of cores", n.CPU)
	}
	if n.Memory <= 0 {
		return fmt.Errorf("--memory %d: expected a positive quantity such as 8Gi", n.Memory)
	}
	if err := facts.CheckSegment("name", n.Architecture); err != nil {
		return fmt.Errorf("--architecture: %w", err)
	}
	if err := facts.CheckSegment("name", n.Zone); err != nil {
		return fmt.Errorf("--zone: %w", err)
	}
	if n.Address != "" {
		if _, err := netip.ParseAddr(n.Address); err != nil {
			return fmt.Errorf("node address %q: expected an IP address such as 10.0.0.5", n.Address)
		}
	}
	if n.LogsAddr != "" {
		if _, p, err := net.SplitHostPort(n.LogsAddr); err != nil || p == "" || p == "0" {
			return fmt.Errorf("--logs-address %q: expected host:port such as 127.0.0.1:7070", n.LogsAddr)
		}
	}
	if n.Runtime == nil {
		return fmt.Errorf("node %s: no runtime", n.ID)
	}
	return nil
}

// Agent runs nodes against one fact store with one shared feed, writer and link.
type Agent struct {
	cfg   Config
	feed  *Feed
	w     *writer
	link  *link
	nodes []*node
}

// New checks the configuration and prepares the nodes; Run starts them.
func New(cfg Config, nodes []NodeConfig) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, errors.New("agent: no nodes")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	ids := make([]string, len(nodes))
	for i, nc := range nodes {
		ids[i] = nc.ID
	}
	a := &Agent{
		cfg:  cfg,
		feed: NewFeed(cfg.Store, cfg.Log, ids...),
		w:    newWriter(cfg.Store, cfg.MaxBatch),
		link: &link{store: cfg.Store, probe: facts.Lease(nodes[0].ID)},
	}
	seen := map[string]bool{}
	for _, nc := range nodes {
		if err := nc.Validate(); err != nil {
			return nil, err
		}
		if seen[nc.ID] {
			return nil, fmt.Errorf("--node-id %s: given twice", nc.ID)
		}
		seen[nc.ID] = true
		a.nodes = append(a.nodes, newNode(a, nc))
	}
	return a, nil
}

// Run runs every node until ctx is done. It never stops a container on its
// way out: an agent that exits leaves its containers running, and the next
// one adopts them.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { a.w.run(ctx) })
	wg.Go(func() { a.feed.Run(ctx) })
	wg.Go(func() { a.link.run(ctx, a.cfg.Probe, a.feed.Resync) })
	for _, n := range a.nodes {
		wg.Go(func() { n.run(ctx) })
		wg.Go(func() { n.holdLease(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// Stats are counters of a running agent.
type Stats struct {
	Txns int64 // etcd transactions committed by the writer
	Ops  int64 // operations in them
	// CommitTime is the time the writer spent in transactions that
	// committed (one writer per agent: its nodes' reports wait on it).
	CommitTime time.Duration
	Running    int  // instances running, over all nodes
	Leases     int  // nodes currently holding a lease
	Connected  bool // etcd answered the last probe
}

// Stats returns the current counters.
func (a *Agent) Stats() Stats {
	s := Stats{Txns: a.w.txns.Load(), Ops: a.w.ops.Load(), CommitTime: time.Duration(a.w.commitNanos.Load()), Connected: a.link.up.Load()}
	for _, n := range a.nodes {
		n.mu.Lock()
		s.Running += n.running
		if n.lease != 0 {
			s.Leases++
		}
		n.mu.Unlock()
	}
	return s
}
