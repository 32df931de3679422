package main

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/containerd"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newAgentCmd) }

// agentFlags are the flags of `ccattler agent`.
type agentFlags struct {
	nodeID, runtime, stateDir string
	logLevel                  string
	cpu                       float64
	memory, arch, zone        string
	leaseTTL, grace           time.Duration
	maxBatch                  int
	ctrdAddress, namespace    string
	imageDir, advertise       string
	snapshotter               string
	nodes                     int
	nodePrefix                string
	simDelay                  time.Duration
	simFailure, simUnhealthy  float64
	simRange                  string
	simSeed                   uint64
	simHostNetwork            bool
	logsAddr                  string
	metricsEvery              time.Duration
}

func newAgentCmd() *cobra.Command {
	f := &agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent --node-id ID --runtime containerd|sim [flags]",
		Short: "Run the node agent: register the node, run what is placed on it, report what is real",
		Long: `Run the node agent.

It registers the node (observed/node/{id} with its capacity, architecture and
zone), holds lease/node/{id} on an etcd lease of --lease-ttl, watches the
placements of its node, starts what is placed on it and stops what is not,
and reports observed/instance/{id}/node|state|image|ip|health|started_at.
A container that exits is reported failed, with its reason and exit status
(observed/instance/{id}/reason|exit_status); the agent does not restart it:
the restart policy replaces it, with a growing delay.

Losing etcd never stops a container: the agent keeps its placements and
their specs in a checksummed cache under --state-dir, and an agent started
while etcd is unreachable adopts the running containers and keeps them
running. It re-reports everything when etcd answers again.

--runtime containerd runs real containers through containerd (host
networking: instances are reached at --advertise-address on their exposed
port, passed to them as $PORT). --runtime sim runs --nodes simulated nodes in
one process, with containers held in memory, for scale tests.

Every --metrics-interval the agent reports each instance's cpu use (cores)
as observed/service/{name}/metrics/cpu/{instance-id}, which the autoscaler
follows: containerd measures the task's cgroup; simulated instances share
their service's synthetic load, set while they run with the plugin fact
sim/service/{name}/load (registered under schema/ by the sim agent);
sim/instance/{id}/health = "unhealthy" makes a simulated instance report
that health from then on.`,
		Example: `  # a real node
  ccattler agent --node-id node-1 --runtime containerd --state-dir /var/lib/ccattler \
      --zone eu-1a --image-dir /var/lib/ccattler/images

  # 1000 simulated nodes sim-0001 ... sim-1000 in one process
  ccattler agent --runtime sim --nodes 1000 --node-prefix sim- --state-dir /tmp/sim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runAgent(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodeID, "node-id", defaultNodeID(), "this node's id (lowercase letters, digits, '-')")
	fl.StringVar(&f.runtime, "runtime", "containerd", "container runtime: containerd or sim")
	fl.StringVar(&f.stateDir, "state-dir", "ccattler-agent", "directory of the local cache of placements and specs")
	fl.Float64Var(&f.cpu, "cpu", float64(goruntime.NumCPU()), "cpu cores the node offers (default: this machine's)")
	fl.StringVar(&f.memory, "memory", defaultMemory(), "memory the node offers, e.g. 8Gi (default: this machine's)")
	fl.StringVar(&f.arch, "architecture", goruntime.GOARCH, "the node's cpu architecture")
	fl.StringVar(&f.zone, "zone", "default", "the node's zone")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 30*time.Second, "TTL of the node's lease; the node counts as gone this long after the agent stops")
	fl.DurationVar(&f.grace, "stop-grace", 10*time.Second, "time between SIGTERM and SIGKILL when stopping a container")
	fl.IntVar(&f.maxBatch, "max-batch", 128, "most writes per etcd transaction (etcd's --max-txn-ops)")
	fl.StringVar(&f.ctrdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd's socket")
	fl.StringVar(&f.namespace, "namespace", "ccattler", "containerd namespace of ccattler's containers")
	fl.StringVar(&f.snapshotter, "snapshotter", "overlayfs", "containerd snapshotter (native where overlayfs is unavailable)")
	fl.StringVar(&f.imageDir, "image-dir", "", "directory of image archives (.tar, .tar.gz) to import at start")
	fl.DurationVar(&f.metricsEvery, "metrics-interval", agent.DefaultMetricsInterval, "how often each instance's cpu use is reported for the autoscaler (0 turns it off)")
	fl.StringVar(&f.advertise, "advertise-address", "", "address instances are reported at (default: the first non-loopback IPv4 address)")
	fl.IntVar(&f.nodes, "nodes", 1, "sim: number of simulated nodes")
	fl.StringVar(&f.nodePrefix, "node-prefix", "sim-", "sim: node ids are this prefix and a number, e.g. sim-0001")
	fl.DurationVar(&f.simDelay, "sim-start-delay", 100*time.Millisecond, "sim: how long a simulated start takes")
	fl.Float64Var(&f.simFailure, "sim-failure-rate", 0, "sim: share of starts that fail, 0..1")
	fl.Float64Var(&f.simUnhealthy, "sim-unhealthy", 0, "sim: share of instances reported unhealthy, 0..1")
	fl.StringVar(&f.simRange, "sim-ip-range", "10.128.0.0/9", "sim: the range node addresses are drawn from, by a hash of the node id (never dialled)")
	fl.Uint64Var(&f.simSeed, "sim-seed", 1, "sim: seed of the failure and health draws")
	fl.StringVar(&f.logsAddr, "logs-address", "", "serve the containers' output for ccattler logs at this host:port, e.g. 127.0.0.1:7070 (HTTPS on the node's certificate, users and auditors only; plain HTTP when the agent connects without TLS)")
	fl.StringVar(&f.logLevel, "log-level", "info", logLevelUsage)
	fl.BoolVar(&f.simHostNetwork, "sim-host-network", false, "sim: instances share their node's network and ports, as with containerd")
	return cmd
}

func runAgent(cmd *cobra.Command, f *agentFlags) error {
	mem, err := facts.ParseMemory(f.memory)
	if err != nil || mem <= 0 {
		return usageError("--memory %q: expected a positive quantity such as 8Gi or 512Mi", f.memory)
	}
	if f.runtime != "containerd" && f.runtime != "sim" {
		return usageError("--runtime %q: expected containerd or sim", f.runtime)
	}
	if f.nodes < 1 || (f.runtime != "sim" && f.nodes != 1) {
		return usageError("--nodes %d: expected 1, or any positive number with --runtime sim", f.nodes)
	}
	log, err := newLogger(cmd.ErrOrStderr(), f.logLevel)
	if err != nil {
		return err
	}
	ctx, stop := stopOnInterrupt(cmd.Context(), cmd.ErrOrStderr())
	defer stop()

	// A simulated fleet runs under one identity for all its nodes:
	// node:{prefix}* may write for every node whose id has the prefix.
	identity := "node:" + f.nodeID
	if f.runtime == "sim" && !(f.nodes == 1 && cmd.Flags().Changed("node-id")) {
		identity = "node:" + f.nodePrefix + "*"
	}
	tlsCfg, eps, err := g.connection(identity)
	if err != nil {
		return err
	}
	store, err := agent.ConnectTLS(eps, g.root, tlsCfg)
	if err != nil {
		return usageError("%v", err)
	}
	defer store.Close()
	cfg := agent.NewConfig()
	cfg.Store, cfg.StateDir, cfg.LeaseTTL, cfg.Grace, cfg.MaxBatch, cfg.Log = store, f.stateDir, f.leaseTTL, f.grace, f.maxBatch, log

	var nodes []agent.NodeConfig
	base := agent.NodeConfig{CPU: f.cpu, Memory: mem, Architecture: f.arch, Zone: f.zone}
	switch f.runtime {
	case "sim":
		sc := sim.NewConfig()
		sc.StartDelay, sc.FailureRate, sc.Unhealthy, sc.Seed = f.simDelay, f.simFailure, f.simUnhealthy, f.simSeed
		sc.HostNetwork = f.simHostNetwork
		if sc.Range, err = netip.ParsePrefix(f.simRange); err != nil {
			return usageError("--sim-ip-range %q: expected an IPv4 prefix such as 10.128.0.0/9", f.simRange)
		}
		fleet, err := sim.NewFleet(sc)
		if err != nil {
			return usageError("%v", err)
		}
		cfg.SyncCache = false // simulated nodes exercise the cache; they do not rely on it
		for i := 1; i <= f.nodes; i++ {
			n := base
			n.ID = fmt.Sprintf("%s%04d", f.nodePrefix, i)
			if f.nodes == 1 && cmd.Flags().Changed("node-id") {
				n.ID = f.nodeID // one simulated node under its own name, e.g. node-2
			}
			n.Runtime, n.HostNetwork = fleet.Node(n.ID), sc.HostNetwork
			nodes = append(nodes, n)
		}
		go fleet.Follow(ctx, store, log) // the sim/ knobs: synthetic loads, health overrides
		log.Info("simulated nodes", "count", f.nodes, "first", nodes[0].ID, "last", nodes[len(nodes)-1].ID, "seed", f.simSeed)
	case "containerd":
		rc := containerd.NewConfig()
		rc.Address, rc.Namespace, rc.ImageDir, rc.Log = f.ctrdAddress, f.namespace, f.imageDir, log
		rc.Address4, rc.Snapshotter = f.advertise, f.snapshotter
		if rc.Address4 == "" {
			rc.Address4 = defaultAddress()
		}
		if f.stateDir != "" {
			rc.LogDir = f.stateDir + "/logs"
			rc.VolumeDir = f.stateDir + "/volumes"
		}
		rt, err := containerd.New(ctx, rc)
		if err != nil {
			return usageError("%v", err)
		}
		defer rt.Close()
		n := base
		n.ID, n.Runtime = f.nodeID, rt
		n.HostNetwork = true // see agent/containerd/doc.go
		nodes = append(nodes, n)
	}
	for i := range nodes {
		nodes[i].LogsAddr = f.logsAddr
	}
	a, err := agent.New(cfg, nodes)
	if err != nil {
		return usageError("%v", err)
	}
	if f.logsAddr != "" {
		ls := &agent.LogServer{Addr: f.logsAddr, Nodes: nodes, Log: log}
		if ls.TLS, err = logsServerTLS(tlsCfg); err != nil {
			return usageError("--logs-address %s: %v", f.logsAddr, err)
		}
		go func() {
			if err := ls.Serve(ctx); err != nil {
				log.Error("container output is not served", "err", err)
			}
		}()
	}
	vols := &agent.Volumes{Store: store, Nodes: nodes, Log: log}
	go vols.Run(ctx)
	if f.metricsEvery > 0 {
		m := &agent.Metrics{Store: store, Nodes: nodes, Interval: f.metricsEvery, MaxBatch: f.maxBatch, Log: log}
		go m.Run(ctx)
	}
	log.Info("agent running", "etcd", strings.Join(eps, ","), "runtime", f.runtime, "nodes", len(nodes), "state_dir", f.stateDir)
	a.Run(ctx)
	log.Info("agent stopped; containers keep running")
	return nil
}

// defaultNodeID is the host name, if it is a valid node id.
func defaultNodeID() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	h = strings.ToLower(strings.Split(h, ".")[0])
	if facts.CheckSegment("node-id", h) != nil {
		return ""
	}
	return h
}

// defaultMemory is MemTotal of /proc/meminfo.
func defaultMemory() string {
	if b := memTotal(); b > 0 {
		return facts.FormatMemory(b >> 20 << 20) // whole MiB: "23Gi" or "24105Mi" reads better than Ki
	}
	return "1Gi"
}

// memTotal is MemTotal of /proc/meminfo in bytes, 0 when unknown.
func memTotal() int64 {
	fh, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// defaultAddress is the first non-loopback IPv4 address of the machine.
func defaultAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return "127.0.0.1"
}
