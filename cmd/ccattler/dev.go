package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newDevCmd) }

// devFlags are the flags of `ccattler dev`.
type devFlags struct {
	nodes     int
	files     []string
	dataDir   string
	keep      bool
	policies  string
	cpu       float64
	memory    string
	leaseTTL  time.Duration
	simDelay  time.Duration
	logLevel  string
	reportLog bool
}

func newDevCmd() *cobra.Command {
	f := &devFlags{}
	ops := &devOps{}
	// dev is for one person's machine: plain http and no etcd auth, so
	// that every other command reaches it with no certificate. It says so.
	cfg := serverConfig{Embed: embedded.NewConfig(), Engine: engine.NewConfig(), Insecure: true}
	cmd := &cobra.Command{
		Use:   "dev [-f FILE]...",
		Short: "Run all of CCattler in one process: embedded etcd, the rules engine, simulated nodes",
		Long: `Run CCattler's main job on its embedded default: an in-process etcd, the rules
engine with the default policies (or --policies DIR), and --nodes simulated
nodes named node-1, node-2, ... whose containers live in memory. Files given
with -f are applied once everything is up. The live log shows convergence as
it happens: every rule firing with what it wrote, every report of the nodes'
agents, every apply.

Other commands reach it with no flags while it runs: ccattler get instances,
ccattler apply -f ..., ccattler why KEY. It writes a context named dev (dev-PORT
off etcd's default port) into the client configuration and makes it current
(ccattler config); at exit the context goes and the one before is current
again. A default port that is taken (a second dev, a server) is replaced by a
free one, and dev says so.

It serves the web console (/ui/) and /metrics on --admin-addr like ccattler server. --watch DIR runs the
rules in DIR and reloads them when their files change; ccattler rules reload
reloads them on demand.

Ctrl-C stops it; its data goes with it unless --data-dir is given.

dev is insecure: no TLS, no client certificates, no etcd auth, so any
client that reaches it may write anything. ccattler server is the secure
control plane (docs/security.md).`,
		Example: `  ccattler dev -f examples/web.hcl
  ccattler dev --nodes 5 --node-cpu 2 -f examples/
  ccattler dev --policies ./my-policies -f examples/web.hcl
  ccattler dev --watch ./my-policies -f examples/web.hcl   # edit the rules, see them reload`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.nodes < 1 {
				return usageError("--nodes %d: expected at least 1", f.nodes)
			}
			mem, err := facts.ParseMemory(f.memory)
			if err != nil || mem <= 0 {
				return usageError("--node-memory %q: expected a quantity such as 8Gi", f.memory)
			}
			// Read the files first: a mistake is reported before anything starts.
			var doc *spec.Doc
			if len(f.files) > 0 {
				srcs, err := spec.ReadFiles(f.files)
				if err != nil {
					return err
				}
				var diags hcl.Diagnostics
				doc, diags = spec.Decode(srcs...)
				if diags.HasErrors() {
					_ = spec.WriteDiagnostics(cmd.ErrOrStderr(), doc.Files, diags)
					return exitError{code: 1, err: fmt.Errorf("nothing started: %d %s in the files", len(diags.Errs()), plural(len(diags.Errs()), "problem", "problems"))}
				}
			}
			log, err := newLogger(cmd.ErrOrStderr(), f.logLevel)
			if err != nil {
				return err
			}
			// What dev leaves nothing of, undone last first at exit, and on
			// a forced stop too.
			var atExit []func()
			cleanUp := func() {
				for i := len(atExit) - 1; i >= 0; i-- {
					atExit[i]()
				}
			}
			defer cleanUp()
			if f.dataDir == "" {
				dir, err := os.MkdirTemp("", "ccattler-dev-")
				if err != nil {
					return err
				}
				if !f.keep {
					atExit = append(atExit, func() { _ = os.RemoveAll(dir) })
				}
				f.dataDir = dir
			}
			cfg.Embed.DataDir = f.dataDir
			cfg.Embed.Solo = true // a dev is never joined
			cfg.Root, cfg.DialTimeout, cfg.Log, cfg.Policies = g.root, g.dialTimeout, log, f.policies
			out := cmd.OutOrStdout()
			if err := devPorts(cmd.Flags(), &cfg, ops, out); err != nil {
				return err
			}
			undo, err := writeDevContext(cfg.Embed.ClientURL, g.root, out)
			if err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: no context written for this dev: %v\n", err)
			}
			atExit = append(atExit, undo)
			cfg.Ready = func(ctx context.Context, store *facts.Store, mirror *facts.Mirror) error {
				return devReady(ctx, f, mem, doc, store, log, out)
			}
			ctx, stop := stopOnInterrupt(cmd.Context(), cmd.ErrOrStderr(), cleanUp)
			defer stop()
			fmt.Fprintf(out, "ccattler dev: etcd %s (insecure: no TLS, no auth),%s data %s, %d simulated nodes; Ctrl-C stops\n", cfg.Embed.ClientURL, devAdminNote(cfg.Ops), f.dataDir, f.nodes)
			return unlessInterrupted(ctx, log, runServer(ctx, cfg))
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.nodes, "nodes", 3, "simulated nodes, named node-1, node-2, ...")
	addCompactFlag(fl, &cfg.CompactEvery)
	fl.StringArrayVarP(&f.files, "file", "f", nil, "service or volume file, or directory of *.hcl, to apply once up (repeatable)")
	fl.StringVar(&f.dataDir, "data-dir", "", "etcd data directory (default: a temporary one, removed at exit)")
	fl.BoolVar(&f.keep, "keep", false, "keep the temporary data directory at exit")
	fl.StringVar(&f.policies, "policies", "", "rule directory to run instead of the built-in default policies")
	fl.Float64Var(&f.cpu, "node-cpu", 4, "cpu cores each simulated node offers")
	fl.StringVar(&f.memory, "node-memory", "8Gi", "memory each simulated node offers")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", 10*time.Second, "TTL of each node's lease")
	fl.DurationVar(&f.simDelay, "sim-start-delay", 200*time.Millisecond, "how long a simulated container takes to start")
	fl.StringVar(&f.logLevel, "log-level", "warn", logLevelUsage)
	fl.BoolVar(&f.reportLog, "show-leases", false, "also show lease renewals in the live log")
	fl.StringVar(&cfg.Embed.ClientURL, "listen-client", cfg.Embed.ClientURL, "URL the embedded etcd serves clients on")
	fl.StringVar(&cfg.Embed.PeerURL, "listen-peer", cfg.Embed.PeerURL, "URL the embedded etcd serves peers on")
	addDevOpsFlags(fl, ops)
	return cmd
}

// devReady starts the live log and the simulated nodes, then applies the files.
func devReady(ctx context.Context, f *devFlags, mem int64, doc *spec.Doc, store *facts.Store, log *slog.Logger, out io.Writer) error {
	go func() {
		if err := liveLog(ctx, store, 0, out, f.reportLog); err != nil && ctx.Err() == nil {
			log.Warn("live log stopped", "err", err)
		}
	}()
	sc := sim.NewConfig()
	sc.StartDelay = f.simDelay
	sc.Range = netip.MustParsePrefix("10.1.0.0/16") // the key schema's example addresses; never dialled
	fleet, err := sim.NewFleet(sc)
	if err != nil {
		return err
	}
	cfg := agent.NewConfig()
	cfg.Store, cfg.LeaseTTL, cfg.Log, cfg.SyncCache = store, f.leaseTTL, log, false
	cfg.StateDir = filepath.Join(f.dataDir, "agents")
	var nodes []agent.NodeConfig
	for i := 1; i <= f.nodes; i++ {
		id := fmt.Sprintf("node-%d", i)
		nodes = append(nodes, agent.NodeConfig{ID: id, CPU: f.cpu, Memory: mem,
			Architecture: goruntime.GOARCH, Zone: "zone-1", Runtime: fleet.Node(id)})
	}
	a, err := agent.New(cfg, nodes)
	if err != nil {
		return err
	}
	go a.Run(ctx)
	// What `ccattler agent --runtime sim` runs beside its nodes: the sim's
	// knobs (sim/service/{name}/load, sim/instance/{id}/health), cpu metrics
	// for the autoscaler, volume reports.
	go fleet.Follow(ctx, store, log)
	go (&agent.Metrics{Store: store, Nodes: nodes, Log: log}).Run(ctx)
	go (&agent.Volumes{Store: store, Nodes: nodes, Log: log}).Run(ctx)
	if doc == nil {
		return nil
	}
	// Apply once every node holds its lease, so the first placements see them all.
	if err := waitNodes(ctx, store, f.nodes, 30*time.Second); err != nil {
		return err
	}
	res, err := spec.Apply(ctx, store, doc, spec.Options{})
	if err != nil {
		return fmt.Errorf("apply %s: %w", strings.Join(f.files, ", "), err)
	}
	if !res.Written {
		fmt.Fprintf(out, "%s  apply: %s already as declared\n", stamp(time.Now()), strings.Join(f.files, ", "))
	}
	return nil
}

// waitNodes waits until n nodes hold their leases.
func waitNodes(ctx context.Context, store *facts.Store, n int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		leases, _, err := store.List(ctx, "lease/node/", 0)
		if err == nil && len(leases) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d nodes registered within %s", len(leases), n, within)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
