package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/engine/promexport"
	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/policies"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
)

// defaultAdminAddr is where the server serves /metrics unless told otherwise.
const defaultAdminAddr = "127.0.0.1:2381"

// opsConfig is how the server is operated: hot reload and the admin endpoint.
type opsConfig struct {
	Watch     bool   // --watch: reload when the --policies files change
	AdminAddr string // --admin-addr: /metrics; empty: not served
	// adminRequired: --admin-addr was given, so failing to listen is an
	// error; the default address being taken (another server on this
	// machine) is only a warning.
	adminRequired func() bool
}

// addEngineFlags adds the rules engine's flags to `ccattler server`.
func addEngineFlags(f *pflag.FlagSet, cfg *serverConfig) {
	f.StringVar(&cfg.Policies, "policies", "", "rule directory the engine runs (*.hcl) instead of the default policies built in")
	f.BoolVar(&cfg.NoEngine, "no-engine", false, "serve the fact store only: run no rules engine")
	f.StringVar(&cfg.Engine.Identity, "engine-id", cfg.Engine.Identity, "this server's name in the leader election and in firing records")
	f.DurationVar(&cfg.Engine.SessionTTL, "leader-ttl", cfg.Engine.SessionTTL, "how long a stopped leader keeps leadership before a standby takes over")
	f.DurationVar(&cfg.Engine.EventMaxAge, "event-max-age", cfg.Engine.EventMaxAge, "firing records older than this are deleted (0: no age limit)")
	f.IntVar(&cfg.Engine.EventMaxCount, "event-max-count", cfg.Engine.EventMaxCount, "the most firing records kept; the oldest go first (0: no limit)")
	f.IntVar(&cfg.Engine.RoundFirings, "round-firings", cfg.Engine.RoundFirings, "the most firings a round plans before its plan is committed and the rest evaluated against it (0: no limit)")
	f.BoolVar(&cfg.Engine.OverlapCommit, "overlap-commit", cfg.Engine.OverlapCommit, "commit every round's plan while the next round is evaluated on the plan's writes, not only a round cut at its budget (the guards and firing records stay in the same transactions)")
	f.Uint64Var(&cfg.Engine.RoundCost, "round-cost", cfg.Engine.RoundCost, "the CEL cost one rule may spend in a round before its tasks left wait for the next (four such end the round; 0: no limit)")
	f.DurationVar(&cfg.Engine.RoundTime, "round-time", cfg.Engine.RoundTime, "how long one rule may evaluate in a round before its tasks left wait for the next (four such end the round; 0: no limit)")
	addResyncFlag(f, &cfg.Engine.ResyncInterval, "at rest, at most this often, evaluate every rule whole and commit what the incremental rounds missed, logged at warn level and counted by rule in ccattler_engine_resync_firings_total (0: never)")
	f.BoolVar(&cfg.Ops.Watch, "watch", false, "reload the --policies rule set when its files change (checked every 500ms); a set with errors is rejected and the running one stays")
	f.StringVar(&cfg.Ops.AdminAddr, "admin-addr", defaultAdminAddr, "host:port serving Prometheus metrics at /metrics and, on a loopback address, the web console at /ui/ (empty: none)")
	cfg.Ops.adminRequired = func() bool { return f.Changed("admin-addr") }
}

// addResyncFlag adds --resync-every (engine.Config.ResyncInterval) to f,
// its default the engine's: a negative interval is refused as the flag is
// parsed, naming it, before anything starts.
func addResyncFlag(f *pflag.FlagSet, every *time.Duration, usage string) {
	*every = engine.NewConfig().ResyncInterval
	f.Var((*resyncEvery)(every), "resync-every", usage)
}

// resyncEvery is --resync-every's value: a duration checked on Set.
type resyncEvery time.Duration

func (r *resyncEvery) String() string { return time.Duration(*r).String() }
func (r *resyncEvery) Type() string   { return "duration" }
func (r *resyncEvery) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return errors.New("expected a duration such as 10m, or 0 (never resync)")
	}
	*r = resyncEvery(d)
	return nil
}

// startEngine loads the rule set of --policies (the default policies built
// into the binary when it is empty) and runs the engine on the mirror under
// an etcd election: one server writes, the others wait as standbys. Beside
// it run the reloader (`ccattler rules reload`, --watch) and the admin
// endpoint (/metrics). With --no-engine only the admin endpoint starts
// (mirror metrics); done is then nil (never ready). stop ends everything
// (the engine resigning, so a standby takes over at once) and waits for it.
func startEngine(ctx context.Context, cfg serverConfig, store *facts.Store, mirror *facts.Mirror, log *slog.Logger) (done <-chan error, stop func(), err error) {
	src := promexport.Sources{Mirror: mirror.Stats}
	if cfg.NoEngine {
		log.Info("--no-engine: the rules engine is not running")
		ui, err := newConsole(ctx, cfg.Ops, store, mirror, nil, nil)
		if err != nil {
			return nil, nil, err
		}
		stopAdmin, err := serveAdmin(cfg.Ops, src, log, ui...)
		if err != nil {
			return nil, nil, err
		}
		return nil, stopAdmin, nil
	}
	if cfg.Ops.Watch && cfg.Policies == "" {
		return nil, nil, usageError("--watch needs --policies DIR: the built-in policies cannot change")
	}
	rs, files, diags := loadPolicies(cfg.Policies, store.Schema)
	if !diags.HasErrors() && cfg.permit != nil {
		diags = append(diags, cfg.permit(rs)...)
	}
	if diags.HasErrors() {
		var b strings.Builder
		writeDiags(&b, files, diags)
		return nil, nil, fmt.Errorf("--policies %s: rule set rejected: %s\n%s", policiesName(cfg.Policies), countErrors(diags), b.String())
	}
	ecfg := cfg.Engine
	ecfg.Log = log
	if len(cfg.Endpoints) == 0 { // the embedded etcd takes larger transactions than etcd's defaults
		ecfg.MaxTxnOps = int(cfg.Embed.MaxTxnOps)
		ecfg.MaxTxnBytes = int(cfg.Embed.MaxRequest) / 2
	}
	if err := ecfg.Validate(); err != nil {
		return nil, nil, usageError("%v", err)
	}
	// The engine's context: a round in progress when it ends stops at its
	// next binding (eval.WithStop), so that a shutdown is not held up.
	ectx, cancel := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	stopping := func() bool { return ectx.Err() != nil }
	var eng *engine.Engine // set before its rounds run, which alone call pending
	pending := func() bool { return eng.Pending() }
	newEval := func(rs *rules.RuleSet) engine.Evaluator {
		return engine.NewRuleSetEvaluator(rs, log, eval.WithMaxFirings(ecfg.RoundFirings), eval.WithRoundBudget(ecfg.RoundCost, ecfg.RoundTime),
			eval.WithYield(pending), eval.WithStop(stopping))
	}
	eng, err = engine.New(store, mirror, newEval(rs), ecfg)
	if err != nil {
		return nil, nil, err
	}
	var running atomic.Pointer[rules.RuleSet] // what the console shows
	running.Store(rs)
	rcfg := reload.Config{Dir: cfg.Policies, Source: policiesName(cfg.Policies), Store: store, Identity: ecfg.Identity,
		Watch: cfg.Ops.Watch, Log: log, Install: func(rs *rules.RuleSet) { running.Store(rs); eng.Swap(newEval(rs)) }, Permit: cfg.permit}
	if cfg.Policies == "" {
		rcfg.Builtin = builtinPolicies()
	}
	rl, err := reload.New(rcfg, rs)
	if err != nil {
		return nil, nil, err
	}
	src.Engine, src.Reload = eng.Stats, rl.Status
	if cfg.compactor != nil {
		src.Compact = cfg.compactor.Stats
	}
	if cfg.OnEngine != nil {
		cfg.OnEngine(eng)
	}
	ui, err := newConsole(ctx, cfg.Ops, store, mirror, &running, eng.Stats)
	if err != nil {
		return nil, nil, err
	}
	stopAdmin, err := serveAdmin(cfg.Ops, src, log, ui...)
	if err != nil {
		return nil, nil, err
	}

	ch := make(chan error, 1)
	go func() { ch <- eng.Run(ectx) }()
	reloaderDone := make(chan struct{})
	go func() { defer close(reloaderDone); rl.Run(ectx) }()
	log.Info("rules engine started", "policies", policiesName(cfg.Policies), "version", rs.Version, "rules", len(rs.Rules),
		"id", ecfg.Identity, "max_txn_ops", ecfg.MaxTxnOps, "watch", cfg.Ops.Watch)
	stopped := make(chan error, 1)
	waiter := make(chan error, 1)
	go func() {
		err := <-ch
		if ectx.Err() == nil { // a failure, not a shutdown
			waiter <- err
		}
		stopped <- err
	}()
	return waiter, func() {
		cancel()
		awaitStop(log, "the rules engine: its round in progress, its commit, its resignation", func() { <-stopped })
		awaitStop(log, "the rule reloader", func() { <-reloaderDone })
		awaitStop(log, "the admin endpoint", stopAdmin)
	}, nil
}

// serveAdmin serves /metrics on --admin-addr, and the extra handlers (the
// web console); a LoopbackOnly one only when the address is a loopback
// one. The default address already in use is a warning (the control plane
// runs without metrics); an address given explicitly must work.
func serveAdmin(ops opsConfig, src promexport.Sources, log *slog.Logger, extra ...adminHandler) (stop func(), err error) {
	if ops.AdminAddr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", ops.AdminAddr)
	if err != nil {
		if ops.adminRequired != nil && ops.adminRequired() {
			return nil, fmt.Errorf("--admin-addr %s: %w", ops.AdminAddr, err)
		}
		log.Warn("admin endpoint not served: its default address is taken; set --admin-addr", "addr", ops.AdminAddr, "err", err)
		return func() {}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(promexport.New(src), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	for _, h := range extra {
		if !h.servedOn(ln.Addr()) {
			log.Warn("admin endpoint: "+h.Pattern+" not served: it is served on a loopback --admin-addr only (reach it through an SSH tunnel)", "addr", ln.Addr().String())
			continue
		}
		mux.Handle(h.Pattern, h.Handler)
		log.Info("admin endpoint serving "+h.Pattern, "url", "http://"+ln.Addr().String()+h.Pattern)
	}
	// Streams (the console's live pages) end when the endpoint stops.
	base, cancelBase := context.WithCancel(context.Background())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return base }}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("admin endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	log.Info("admin endpoint serving /metrics", "addr", ln.Addr().String())
	return func() {
		cancelBase()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-served
	}, nil
}

// loadPolicies loads the rule set of dir, or the default policies built into
// the binary when dir is empty.
func loadPolicies(dir string, schema *facts.Schema) (*rules.RuleSet, map[string]*hcl.File, hcl.Diagnostics) {
	if dir != "" {
		return rules.LoadWithFiles(dir, rules.WithSchema(schema))
	}
	return rules.LoadFilesWithSources(builtinPolicies(), rules.WithSchema(schema))
}

// builtinPolicies returns the default policies' files, named policies/*.hcl.
func builtinPolicies() map[string][]byte {
	files := map[string][]byte{}
	for n, b := range policies.Sources() {
		files["policies/"+n] = b
	}
	return files
}

func policiesName(dir string) string {
	if dir == "" {
		return "(built-in default policies)"
	}
	return dir
}
