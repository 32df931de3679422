package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newBenchCmd) }

// benchPresets are the sizes of --size: nodes and instances.
var benchPresets = map[string][2]int{
	"small":  {100, 1000},
	"medium": {1000, 10000},
	"large":  {5000, 100000},
}

// benchFlags are the flags of `ccattler bench`.
type benchFlags struct {
	size         string
	nodes        int
	instances    int
	services     int
	timeout      time.Duration
	stall        time.Duration
	changes      int
	killShare    float64
	leaseTTL     time.Duration
	simDelay     time.Duration
	agentBatch   int
	rawFor       time.Duration
	rawBatch     int
	cpuProfile   string
	memProfile   string
	logLevel     string
	keep         bool
	noRecovery   bool
	roundFirings int
	overlap      bool
	resync       time.Duration
	agentCache   bool
	secure       bool
	roundCost    uint64
	roundTime    time.Duration
	scaleTo      int
	deleteAll    bool
	profilePhase string
	compactEvery time.Duration
}

func newBenchCmd() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench [--size small|medium|large]",
		Short: "Measure convergence, failure recovery and the cost of one change, all parts real, in one process",
		Long: `Run CCattler as ` + "`ccattler dev`" + ` does — an embedded etcd in a fresh temporary data
directory on free loopback ports, the rules engine with the default policies,
simulated nodes in-process — and measure it:

  converge   apply S services totalling N instances; time until every
             instance is running and healthy and every endpoint exists;
             keys and transactions committed, the engine's firings by
             rule, compare conflicts, process CPU seconds and the
             collector's part of them, peak heap and RSS, mirror bytes
             per fact (its facts indexed again in a child process, alone
             on its heap);
             the pace of the first and the last tenth of the instances;
             each instance's way in stages, as the watch delivered them
             (apply → created → placed → running healthy → endpoint:
             median, 90th percentile, longest), which tells where the
             pipeline waits;
             how evenly they were placed (instances per node, and those
             beyond an even spread of their service);
             where the engine's time went (evaluating, applying plans,
             waiting for its writes through the watch, idle) and the
             agents' time in their transactions; what the evaluator did,
             counted (tasks, CEL evaluations, facts visited, aggregate
             groups computed, served kept and adjusted to changes);
             the engine's rounds one by one with -o json (when each
             began, how long it evaluated, the changes it took, what it
             planned by rule)
  raw etcd   a batched-transaction put loop against the same etcd, the
             baseline CCattler's committed keys/s is a ratio of
  change     change one instance's health, --changes times, each timed
             from the write to the endpoint write it causes
  recovery   stop the agents of --kill-share of the nodes and revoke their
             leases; time from the leases' expiry until every replacement
             runs and the endpoints are updated, with and without the
             failure policy's 12s grace before a node is unreachable
  scale-down with --scale-to N: set every service's count to N as
             ccattler scale does; time until exactly N of each run and
             every other is stopped without a placement, its stop noted;
             the transactions the stops went in, rounds, firings by rule
  delete     with --delete: delete every service as ccattler delete does;
             the same figures until none is placed or pending

A progress line goes to stderr while it runs; the figures go to stdout as a
table, or one JSON object with -o json. CPU is the whole process's (etcd,
engine, agents and this measurement together; getrusage), memory the whole
process's too. Exit code 1 when a phase does not finish within --timeout, or
makes no progress for --stall; either way stderr then says what is left:
each unfinished service's instances by where they stand, and what one fresh
evaluation of the rules on the live facts would fire (firings there point at
the engine; none, at the facts or the agents), and the mirror against etcd:
the keys a removal writes, the keys those fresh firings read and write, and
a new watch from the mirror's revision.`,
		Example: `  ccattler bench                       # small: 100 nodes, 1,000 instances
  ccattler bench --size medium -o json
  ccattler bench --nodes 10 --instances 50 --services 5
  ccattler bench --size large --cpuprofile cpu.out --memprofile mem.out`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.resolve(cmd); err != nil {
				return err
			}
			log, err := newLogger(cmd.ErrOrStderr(), f.logLevel)
			if err != nil {
				return err
			}
			if f.cpuProfile != "" && f.profilePhase == "" {
				pf, err := os.Create(f.cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			dir, err := os.MkdirTemp("", "ccattler-bench-")
			if err != nil {
				return err
			}
			// etcd's data of a large run is gigabytes: a second Ctrl-C,
			// which does not wait for the graceful stop, removes it too.
			removeDir := func() {
				if !f.keep {
					_ = os.RemoveAll(dir)
				}
			}
			defer removeDir()
			ctx, stop := stopOnInterrupt(cmd.Context(), cmd.ErrOrStderr(), removeDir)
			defer stop()
			res, err := runBench(ctx, f, dir, log, newProgress(cmd.ErrOrStderr()))
			if res != nil {
				out := cmd.OutOrStdout()
				if g.output == "json" {
					if perr := printJSON(out, res); perr != nil {
						return perr
					}
				} else {
					printBenchTable(out, res)
				}
			}
			if err != nil {
				return exitError{code: 1, err: err}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.size, "size", "small", "preset: small (100 nodes, 1,000 instances), medium (1,000, 10,000) or large (5,000, 100,000)")
	fl.IntVar(&f.nodes, "nodes", 0, "simulated nodes (overrides the preset)")
	fl.IntVar(&f.instances, "instances", 0, "instances in total (overrides the preset)")
	fl.IntVar(&f.services, "services", 0, "services the instances are spread over (default: one per 100 instances)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "how long each phase may take before the bench fails with exit code 1")
	fl.DurationVar(&f.stall, "stall", 0, "end a phase, as --timeout does, once it has made no progress for this long, saying what is left (0: never)")
	fl.IntVar(&f.changes, "changes", 1000, "one-fact changes timed in the change phase (0: skip it)")
	fl.Float64Var(&f.killShare, "kill-share", 0.01, "share of the nodes whose leases are killed in the recovery phase (at least one node)")
	fl.IntVar(&f.scaleTo, "scale-to", -1, "after the other phases, scale every service to this many instances and time the stops (-1: skip)")
	fl.BoolVar(&f.deleteAll, "delete", false, "last, delete every service and time until none of their instances is placed or pending")
	fl.BoolVar(&f.noRecovery, "no-recovery", false, "skip the recovery phase (it waits out the failure policy's 12s grace)")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 30*time.Second, "TTL of each simulated node's lease")
	fl.DurationVar(&f.simDelay, "sim-start-delay", 100*time.Millisecond, "how long a simulated container takes to start")
	fl.BoolVar(&f.agentCache, "agent-cache", false, "let the simulated nodes keep their local caches (a file each, rewritten on every change of their placements) on this machine's disk; off by default: on a cluster every node writes its own, and here a thousand share two cores with the control plane")
	fl.Uint64Var(&f.roundCost, "round-cost", engine.NewConfig().RoundCost, "the CEL cost one rule may spend in a round (0: no limit), as ccattler server's --round-cost")
	fl.DurationVar(&f.roundTime, "round-time", engine.NewConfig().RoundTime, "how long one rule may evaluate in a round (0: no limit), as ccattler server's --round-time")
	fl.BoolVar(&f.secure, "secure", false, "run the control plane as ccattler server does by default: TLS with client certificates and etcd auth, the nodes under node:node-*, the services applied as user:admin")
	fl.IntVar(&f.agentBatch, "agent-batch", 1000, "operations per agent transaction (the embedded etcd allows 16384)")
	fl.DurationVar(&f.rawFor, "raw-for", 2*time.Second, "how long the raw etcd put loop runs")
	fl.IntVar(&f.rawBatch, "raw-batch", 1000, "puts per transaction of the raw etcd put loop")
	fl.IntVar(&f.roundFirings, "round-firings", engine.NewConfig().RoundFirings, "the most firings an engine round plans before committing them (0: no limit), as ccattler server --round-firings")
	addResyncFlag(fl, &f.resync, "at rest, at most this often, the engine evaluates every rule whole and commits what its incremental rounds missed (0: never), as ccattler server --resync-every")
	fl.BoolVar(&f.overlap, "overlap-commit", engine.NewConfig().OverlapCommit, "commit every engine round's plan while the next round evaluates, not only a round cut at its budget, as ccattler server --overlap-commit")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	fl.StringVar(&f.profilePhase, "cpuprofile-phase", "", "profile only this phase with --cpuprofile: converge (from the apply until every instance runs; without the raw etcd put loop, which a profile of the whole run includes), change, scale-down or delete")
	fl.StringVar(&f.memProfile, "memprofile", "", "write a heap profile, taken once converged, to this file, and one of the largest live heap seen to this file plus .peak")
	fl.StringVar(&f.logLevel, "log-level", "error", logLevelUsage)
	fl.BoolVar(&f.keep, "keep", false, "keep the temporary etcd data directory")
	addCompactFlag(fl, &f.compactEvery)
	cmd.AddCommand(newBenchWeighCmd())
	return cmd
}

// newBenchWeighCmd is the child process the bench weighs its mirror's table
// in, alone on its heap (tableOverhead).
func newBenchWeighCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "weigh FILE",
		Short:  "Index the facts the bench wrote to FILE and print the table's bytes per fact beyond key and value",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			all, err := readFacts(args[0])
			if err != nil {
				return err
			}
			if len(all) == 0 {
				return fmt.Errorf("%s: no facts to weigh", args[0])
			}
			return printJSON(cmd.OutOrStdout(), weighResult{Facts: len(all), BytesPerFact: weighTable(all)})
		},
	}
}

// resolve applies the preset and checks the flags.
func (f *benchFlags) resolve(cmd *cobra.Command) error {
	p, ok := benchPresets[f.size]
	if !ok {
		return usageError("--size %q: expected small, medium or large", f.size)
	}
	if !cmd.Flags().Changed("nodes") {
		f.nodes = p[0]
	}
	if !cmd.Flags().Changed("instances") {
		f.instances = p[1]
	}
	if !cmd.Flags().Changed("services") {
		f.services = max(1, (f.instances+99)/100)
	}
	switch {
	case f.nodes < 2:
		return usageError("--nodes %d: expected at least 2 (one is killed in the recovery phase)", f.nodes)
	case f.instances < 1:
		return usageError("--instances %d: expected at least 1", f.instances)
	case f.services < 1 || f.services > f.instances:
		return usageError("--services %d: expected 1 to --instances (%d)", f.services, f.instances)
	case f.timeout <= 0:
		return usageError("--timeout %s: expected a positive duration", f.timeout)
	case f.stall < 0:
		return usageError("--stall %s: expected a positive duration, or 0 for never", f.stall)
	case f.changes < 0:
		return usageError("--changes %d: expected 0 or more", f.changes)
	case f.killShare <= 0 || f.killShare >= 0.5:
		return usageError("--kill-share %g: expected a share above 0 and below 0.5", f.killShare)
	case f.leaseTTL < 2*time.Second:
		return usageError("--lease-ttl %s: expected at least 2s", f.leaseTTL)
	case f.agentBatch < 1 || f.agentBatch > 16000:
		return usageError("--agent-batch %d: expected 1 to 16000", f.agentBatch)
	case f.rawBatch < 1 || f.rawBatch > 16000:
		return usageError("--raw-batch %d: expected 1 to 16000", f.rawBatch)
	case f.rawFor <= 0:
		return usageError("--raw-for %s: expected a positive duration", f.rawFor)
	case f.profilePhase != "" && (f.cpuProfile == "" || !slices.Contains(profilePhases, f.profilePhase)):
		return usageError("--cpuprofile-phase %q: expected converge, change, scale-down or delete, with --cpuprofile", f.profilePhase)
	case f.scaleTo < -1 || f.scaleTo > facts.MaxInstances:
		return usageError("--scale-to %d: expected -1 (skip) or 0 to %d", f.scaleTo, facts.MaxInstances)
	}
	return nil
}

// errBenchTimeout marks a phase that did not finish within --timeout.
var errBenchTimeout = errors.New("timed out")

// runBench starts the server as `ccattler dev` does, its data in dir, and
// runs the phases in its Ready hook. It returns what was measured, also
// when a phase failed.
func runBench(ctx context.Context, f *benchFlags, dir string, log *slog.Logger, pr *progress) (*benchResult, error) {
	var err error
	cfg := serverConfig{Embed: embedded.NewConfig(), Engine: engine.NewConfig(), Log: log, Root: facts.DefaultRoot,
		DialTimeout: 10 * time.Second, Insecure: !f.secure}
	cfg.Embed.DataDir = dir
	cfg.Embed.Solo = true
	cfg.CADir = filepath.Join(dir, "pki")
	urls, err := freeLoopbackURLs(2)
	if err != nil {
		return nil, err
	}
	cfg.Embed.ClientURL, cfg.Embed.PeerURL = urls[0], urls[1]
	if f.secure {
		cfg.Embed.ClientURL = strings.Replace(cfg.Embed.ClientURL, "http://", "https://", 1)
		cfg.Embed.PeerURL = strings.Replace(cfg.Embed.PeerURL, "http://", "https://", 1)
	}
	cfg.Engine.Identity = "bench"
	cfg.CompactEvery = f.compactEvery
	cfg.Engine.RoundFirings = f.roundFirings
	cfg.Engine.OverlapCommit = f.overlap
	cfg.Engine.ResyncInterval = f.resync
	cfg.Engine.RoundCost, cfg.Engine.RoundTime = f.roundCost, f.roundTime
	cfg.Ops.AdminAddr = "" // no /metrics: the bench reads the engine's counters itself
	var eng *engine.Engine
	cfg.OnEngine = func(e *engine.Engine) { eng = e }

	b := &bench{f: f, log: log, pr: pr, dir: dir, res: &benchResult{Nodes: f.nodes, Instances: f.instances,
		Services: f.services, RoundFirings: f.roundFirings, OverlapCommit: f.overlap, CompactEverySeconds: f.compactEvery.Seconds(), AgentCache: f.agentCache, CPUs: cpuCount(), CPUNote: "process CPU time (etcd, engine, agents, measurement), getrusage"}}
	cfg.Engine.OnRound = b.rounds.note
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var phaseErr error
	finished := make(chan struct{}) // closed once the phases are over; phaseErr is set then
	cfg.Ready = func(rctx context.Context, store *facts.Store, mirror *facts.Mirror) error {
		b.store, b.agentStore, b.mirror, b.eng = store, store, mirror, eng
		if f.secure {
			closeStores, err := b.secureStores(rctx, cfg.CADir, store.Endpoints())
			if err != nil {
				phaseErr = err
				close(finished)
				cancel()
				return nil
			}
			defer closeStores()
		}
		phaseErr = b.run(rctx)
		close(finished)
		cancel() // the server shuts down cleanly
		return nil
	}
	pr.phase("starting etcd and the engine")
	start := time.Now()
	b.res.LoadAverage[0] = loadAverage()
	served := make(chan error, 1)
	go func() { served <- runServer(sctx, cfg) }()
	var serr error
	select {
	case serr = <-served:
	case <-finished:
		// A round in progress finishes before the engine stops; after a
		// timeout that round may be the very one that was too slow, so the
		// figures do not wait for it long.
		select {
		case serr = <-served:
		case <-time.After(10 * time.Second):
			log.Warn("bench: the server is still shutting down; not waiting for it")
		}
	}
	pr.done()
	b.res.TotalSeconds = time.Since(start).Seconds()
	b.res.LoadAverage[1] = loadAverage()
	if serr != nil {
		return b.res, serr
	}
	// A phase stopped by the interrupt may have failed of it, mid-write:
	// that is the interrupt, not a fault of the cluster.
	if ctx.Err() != nil && (phaseErr == nil || errors.Is(phaseErr, context.Canceled)) {
		phaseErr = errors.New("interrupted: the figures are those measured so far")
	}
	return b.res, phaseErr
}
