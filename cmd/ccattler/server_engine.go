package main

import (
	"io/fs"

	"context"
	"fmt"
	"github.com/ccattler/ccattler/policies"
	"github.com/hashicorp/hcl/v2"
	"log/slog"
	"strings"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
	"github.com/spf13/pflag"
)

// addEngineFlags adds the rules engine's flags to `ccattler server`.
func addEngineFlags(f *pflag.FlagSet, cfg *serverConfig) {
	f.StringVar(&cfg.Policies, "policies", "", "rule directory the engine runs (*.hcl) instead of the default policies built in")
	f.BoolVar(&cfg.NoEngine, "no-engine", false, "serve the fact store only: run no rules engine")
	f.StringVar(&cfg.Engine.Identity, "engine-id", cfg.Engine.Identity, "this server's name in the leader election and in firing records")
	f.DurationVar(&cfg.Engine.SessionTTL, "leader-ttl", cfg.Engine.SessionTTL, "how long a stopped leader keeps leadership before a standby takes over")
	f.DurationVar(&cfg.Engine.EventMaxAge, "event-max-age", cfg.Engine.EventMaxAge, "firing records older than this are deleted (0: no age limit)")
	f.IntVar(&cfg.Engine.EventMaxCount, "event-max-count", cfg.Engine.EventMaxCount, "the most firing records kept; the oldest go first (0: no limit)")
}

// startEngine loads the rule set of --policies (the default policies built
// into the binary when it is empty) and runs the engine on the mirror under
// an etcd election: one server writes, the others wait as standbys. With
// --no-engine it starts nothing; done is then nil (never ready). stop ends
// the engine (resigning, so a standby takes over at once) and waits for it.
func startEngine(ctx context.Context, cfg serverConfig, store *facts.Store, mirror *facts.Mirror, log *slog.Logger) (done <-chan error, stop func(), err error) {
	if cfg.NoEngine {
		log.Info("--no-engine: the rules engine is not running")
		return nil, func() {}, nil
	}
	rs, files, diags := loadPolicies(cfg.Policies, store.Schema)
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
	eng, err := engine.New(store, mirror, engine.NewRuleSetEvaluator(rs, log), ecfg)
	if err != nil {
		return nil, nil, err
	}
	ectx, cancel := context.WithCancel(ctx)
	ch := make(chan error, 1)
	go func() { ch <- eng.Run(ectx) }()
	log.Info("rules engine started", "policies", policiesName(cfg.Policies), "version", rs.Version, "rules", len(rs.Rules),
		"id", ecfg.Identity, "max_txn_ops", ecfg.MaxTxnOps)
	stopped := make(chan error, 1)
	waiter := make(chan error, 1)
	go func() {
		err := <-ch
		if ectx.Err() == nil { // a failure, not a shutdown
			waiter <- err
		}
		stopped <- err
	}()
	return waiter, func() { cancel(); <-stopped }, nil
}

// loadPolicies loads the rule set of dir, or the default policies built into
// the binary when dir is empty.
func loadPolicies(dir string, schema *facts.Schema) (*rules.RuleSet, map[string]*hcl.File, hcl.Diagnostics) {
	if dir != "" {
		return rules.LoadWithFiles(dir, rules.WithSchema(schema))
	}
	names, err := fs.Glob(policies.Files, "*.hcl")
	if err != nil {
		panic(err) // a fixed pattern over an embedded FS
	}
	files := map[string][]byte{}
	for _, n := range names {
		b, err := fs.ReadFile(policies.Files, n)
		if err != nil {
			panic(err)
		}
		files["policies/"+n] = b
	}
	return rules.LoadFilesWithSources(files, rules.WithSchema(schema))
}

func policiesName(dir string) string {
	if dir == "" {
		return "(built-in default policies)"
	}
	return dir
}
