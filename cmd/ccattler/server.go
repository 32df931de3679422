package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newServerCmd) }

// serverConfig is everything `ccattler server` runs with. It is a plain
// struct so that tests and later parts of the server (the rules engine, a
// --policies directory) can be wired in without touching flag parsing.
type serverConfig struct {
	// Endpoints of an existing etcd cluster; when empty the server starts
	// Embed in-process and serves the fact store itself.
	Endpoints   []string
	Embed       embedded.Config
	Root        string
	DialTimeout time.Duration
	// Insecure turns the trust boundary off: plain http, no client
	// certificates, no etcd auth (--insecure; `ccattler dev`). Otherwise
	// the embedded member serves TLS with etcd auth on, its CA in CADir
	// (default DATA-DIR/pki).
	Insecure bool
	CADir    string
	// ClientTLS and Identity are how the server reaches an external etcd
	// (--etcd with --cacert/--cert/--key or --tls-dir): as root it also
	// manages etcd's users and roles.
	ClientTLS *tls.Config
	Identity  string
	Log       *slog.Logger
	// Policies is the rule directory the engine runs (--policies); empty:
	// no engine. Engine configures it (server_engine.go).
	Policies string
	NoEngine bool // --no-engine: serve the fact store only
	Engine   engine.Config
	Ops      opsConfig // --watch, --admin-addr (server_engine.go)
	// Ready, when set, runs once the server is ready (`ccattler dev` starts
	// its simulated nodes and applies its files there); the server stops
	// when it returns an error.
	Ready func(ctx context.Context, store *facts.Store, mirror *facts.Mirror) error
	// ClockInterval is how often the server writes observed/clock while its
	// engine runs (rules about elapsed time read it); 0 means every second.
	ClockInterval time.Duration
	// CompactEvery is how often the engine leader compacts etcd's history
	// (--compact-every; 0: never). server_compact.go.
	CompactEvery time.Duration
	compactor    *engine.Compactor
	// OnEngine, when set, is given the engine once it is created, before
	// Ready runs (`ccattler bench` reads its counters).
	OnEngine func(*engine.Engine)
	// permit checks a rule set against the engine's grants (secure mode).
	permit func(rs *rules.RuleSet) hcl.Diagnostics
}

func newServerCmd() *cobra.Command {
	cfg := serverConfig{Embed: embedded.NewConfig(), Engine: engine.NewConfig()}
	cfg.Embed.ClientURL, cfg.Embed.PeerURL = "https://127.0.0.1:2379", "https://127.0.0.1:2380"
	var logLevel string
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane (with an embedded etcd unless --etcd is given)",
		Long: `Run the CCattler control plane.

With no --etcd flag the server starts a single-member etcd in-process, keeps
its data in --data-dir (it survives restarts) and serves clients on
--listen-client.

It is secure by default: on first start it creates a certificate authority
in DATA-DIR/pki (or --ca-dir), serves TLS on the client and peer URLs, takes
only clients with a certificate from that CA, and turns etcd's
authentication on. A certificate's Common Name is its principal, and etcd
lets each principal read and write what auth/{principal}/rules grants
(docs/security.md): nodes report, never decide. Commands run on this
machine from the directory holding ccattler-data find their certificates
there (user:admin); elsewhere give --tls-dir or --cacert/--cert/--key.
--insecure turns all of this off, and says so in the log.

With --initial-cluster the embedded member is one of several: servers
started with the same --initial-cluster (name=PEER-URL of each) form one
etcd cluster together, each serving its own member, and elect one engine
among them; a majority of them must run for anything to be written. They
share one CA (ccattler certs init, then --ca-dir on each; docs/operations.md)
so that their members trust each other. --initial-cluster-state existing
joins a running cluster after ccattler cluster member add.

With
--etcd URL[,URL...] it uses that existing cluster and starts none. (The
CCATTLER_ETCD variable only sets the address the client commands dial; the
server starts its own etcd unless the flag is given.)

The server registers the built-in fact types under schema/, loads the types
plugins registered there, and keeps an in-memory mirror of every fact.
Ctrl-C or SIGTERM shuts it down cleanly.`,
		Example: `  # the fact store on this machine, data in ./ccattler-data
  ccattler server

  # elsewhere, on other ports
  ccattler server --data-dir /var/lib/ccattler --listen-client https://127.0.0.1:12379 --listen-peer https://127.0.0.1:12380

  # without TLS or etcd auth (a throwaway cluster; any client may write anything)
  ccattler server --insecure

  # three servers forming one etcd cluster (one CA for all: ccattler certs init --dir /etc/ccattler/pki,
  # copied to each machine); the same on 10.0.0.2 and 10.0.0.3 with --name s2 / s3
  ccattler server --name s1 --ca-dir /etc/ccattler/pki \
    --listen-client https://10.0.0.1:2379 --listen-peer https://10.0.0.1:2380 \
    --initial-cluster s1=https://10.0.0.1:2380,s2=https://10.0.0.2:2380,s3=https://10.0.0.3:2380

  # against an existing etcd cluster
  ccattler server --etcd http://10.0.0.1:2379,http://10.0.0.2:2379`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if cfg.Log, err = newLogger(cmd.ErrOrStderr(), logLevel); err != nil {
				return err
			}
			if cmd.Flags().Changed("etcd") {
				cfg.Endpoints = g.endpoints()
				if len(cfg.Endpoints) == 0 {
					return usageError("--etcd is empty: expected URL[,URL...], or leave it out to run an embedded etcd")
				}
				tlsCfg, identity, err := g.tls.resolve(access.Root, true, false)
				if err != nil {
					return err
				}
				if cfg.Endpoints, err = secureEndpoints(cfg.Endpoints, tlsCfg != nil); err != nil {
					return err
				}
				cfg.ClientTLS, cfg.Identity = tlsCfg, identity
			} else {
				if cfg.Insecure {
					for _, u := range []struct {
						name string
						v    *string
					}{{"listen-client", &cfg.Embed.ClientURL}, {"listen-peer", &cfg.Embed.PeerURL}} {
						if !cmd.Flags().Changed(u.name) {
							*u.v = strings.Replace(*u.v, "https://", "http://", 1)
						}
					}
				} else {
					cfg.Embed.TLS = &embedded.TLS{} // filled in at start; Validate checks the URLs are https
				}
				if err := cfg.Embed.Validate(); err != nil {
					return usageError("%v", err)
				}
			}
			if cmd.Flags().Changed("name") && !cmd.Flags().Changed("engine-id") {
				cfg.Engine.Identity = cfg.Embed.Name
			}
			for _, fl := range []string{"name", "initial-cluster", "initial-cluster-state", "initial-cluster-token"} {
				if cmd.Flags().Changed(fl) && cmd.Flags().Changed("etcd") {
					return usageError("--%s is about the embedded etcd member; with --etcd the server starts none", fl)
				}
			}
			cfg.Root, cfg.DialTimeout = g.root, g.dialTimeout
			ctx, stop := stopOnInterrupt(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			return unlessInterrupted(ctx, cfg.Log, runServer(ctx, cfg))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Embed.DataDir, "data-dir", cfg.Embed.DataDir, "where the embedded etcd keeps its data")
	f.StringVar(&cfg.Embed.ClientURL, "listen-client", cfg.Embed.ClientURL, "client URL of the embedded etcd")
	f.StringVar(&cfg.Embed.PeerURL, "listen-peer", cfg.Embed.PeerURL, "peer URL of the embedded etcd")
	f.UintVar(&cfg.Embed.MaxTxnOps, "max-txn-ops", cfg.Embed.MaxTxnOps, "operations allowed in one transaction of the embedded etcd")
	f.StringVar(&logLevel, "log-level", "info", logLevelUsage)
	f.BoolVar(&cfg.Insecure, "insecure", false, "serve plain http with no client certificates and no etcd auth: any client may write anything")
	f.StringVar(&cfg.Embed.Name, "name", cfg.Embed.Name, "this server's etcd member name (and, unless --engine-id is given, its engine's)")
	f.StringVar(&cfg.Embed.InitialCluster, "initial-cluster", "",
		"the servers that form the etcd cluster together: name=PEER-URL,... with this one's --name and --listen-peer among them (first start only)")
	f.StringVar(&cfg.Embed.ClusterState, "initial-cluster-state", "new",
		"new: the --initial-cluster members bootstrap together; existing: join a running cluster that added this member (ccattler cluster member add)")
	f.StringVar(&cfg.Embed.ClusterToken, "initial-cluster-token", "ccattler", "shared by the members of one cluster, so that two clusters bootstrapping on one network stay apart")
	f.StringVar(&cfg.CADir, "ca-dir", "", "the CA of the embedded etcd's TLS and of every principal's certificate (default DATA-DIR/pki; created if missing)")
	addEngineFlags(f, &cfg)
	addCompactFlag(f, &cfg.CompactEvery)
	return cmd
}

// runServer runs the control plane until ctx is done, then shuts down in
// reverse order of start. It returns nil on a clean shutdown and an error
// naming the part that failed otherwise.
func runServer(ctx context.Context, cfg serverConfig) error {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkCompactEvery(cfg.CompactEvery); err != nil {
		return err
	}
	defer logStopped(ctx, log)()
	tuneGC(log)
	endpoints := cfg.Endpoints
	// The server reaches etcd as two principals where it can: root for
	// users, roles and the built-in facts, the engine for the rest, so
	// that the engine holds only what its rules may write.
	adminTLS, engineTLS := cfg.ClientTLS, cfg.ClientTLS
	manage := cfg.ClientTLS != nil && cfg.Identity == access.Root
	secureHint := ""         // how a client reaches a secure embedded etcd
	var etcdErr <-chan error // stays nil (never ready) with an external etcd
	if len(endpoints) == 0 {
		if !cfg.Insecure {
			st, err := prepareEmbeddedTLS(&cfg, log)
			if err != nil {
				return err
			}
			adminTLS, engineTLS, manage = st.root, st.engine, true
			secureHint = fmt.Sprintf("ccattler --etcd %s --tls-dir %s get services", cfg.Embed.ClientURL, st.caDir)
		}
		start := time.Now()
		emb, err := embedded.Start(cfg.Embed)
		if err != nil {
			return err
		}
		defer func() {
			awaitStop(log, "the embedded etcd", emb.Close)
			log.Info("embedded etcd stopped", "data", cfg.Embed.DataDir)
		}()
		endpoints, etcdErr = emb.Endpoints(), emb.Err()
		log.Info("embedded etcd ready", "client", cfg.Embed.ClientURL, "peer", cfg.Embed.PeerURL,
			"data", cfg.Embed.DataDir, "max_txn_ops", cfg.Embed.MaxTxnOps, "tls", cfg.Embed.TLS != nil, "took", time.Since(start).Round(time.Millisecond))
	}
	if cfg.Insecure || (len(cfg.Endpoints) > 0 && cfg.ClientTLS == nil) {
		log.Warn("insecure: no TLS, no client certificates, no etcd auth: any client that reaches etcd may write anything, desired/ included")
	}

	// The server keeps its own schema: plugin types registered under
	// schema/ extend it, not the process-wide default.
	admin, err := facts.Dial(ctx, facts.StoreConfig{Endpoints: endpoints, Root: cfg.Root,
		DialTimeout: cfg.DialTimeout, Schema: facts.NewSchema(), TLS: adminTLS})
	if err != nil {
		return err
	}
	defer admin.Close()
	leaderPrefix := cfg.Engine.LeaderPrefix
	if leaderPrefix == "" {
		leaderPrefix = engine.DefaultLeaderPrefix(admin.Root)
	}
	if manage {
		// Servers of one cluster bootstrap at once; what one of them did
		// first (auth enabled, a role added) can make another's step fail
		// once, and the next attempt finds it done.
		for attempt := 1; ; attempt++ {
			err := secureBootstrap(ctx, admin, leaderPrefix, log)
			if err == nil {
				break
			}
			if attempt == 5 || ctx.Err() != nil {
				return fmt.Errorf("etcd access control: %w", err)
			}
			log.Warn("etcd access control: bootstrap failed; trying again", "attempt", attempt, "err", err)
			facts.Sleep(ctx, time.Duration(attempt)*time.Second)
		}
	} else if cfg.ClientTLS != nil {
		log.Info("etcd users and roles are not managed: the server's certificate is not root's", "identity", cfg.Identity)
	}
	store := admin
	if engineTLS != adminTLS {
		if store, err = facts.Dial(ctx, facts.StoreConfig{Endpoints: endpoints, Root: cfg.Root,
			DialTimeout: cfg.DialTimeout, Schema: facts.NewSchema(), TLS: engineTLS}); err != nil {
			return fmt.Errorf("connect as the engine: %w", err)
		}
		defer store.Close()
	}
	log.Info("connected to etcd", "endpoints", strings.Join(endpoints, ","), "root", store.Root)

	n, err := admin.RegisterBuiltins(ctx)
	if err != nil {
		return fmt.Errorf("register built-in fact types: %w", err)
	}
	log.Info("built-in fact types registered", "written", n, "types", len(admin.Schema.Types()))
	if err := store.LoadPlugins(ctx); err != nil {
		// A bad registration must not keep the control plane down; its
		// facts stay untyped until it is fixed.
		log.Warn("some plugin fact types were rejected", "err", err)
	}

	mirror := facts.NewMirror(store, log)
	synced := time.Now()
	if err := mirror.Sync(ctx); err != nil {
		return fmt.Errorf("mirror: first list: %w", err)
	}
	st, nfacts := mirror.Stats()
	log.Info("mirror synced", "rev", mirror.Rev(), "facts", nfacts, "untyped", st.Untyped, "took", time.Since(synced).Round(time.Millisecond))
	mctx, cancelMirror := context.WithCancel(ctx)
	mirrorDone := make(chan error, 1)
	go func() { mirrorDone <- mirror.Run(mctx) }()
	defer func() {
		cancelMirror()
		awaitStop(log, "the mirror", func() { <-mirrorDone })
	}()

	if manage {
		k := &access.Keeper{Admin: admin, Mirror: mirror, Root: admin.Root, Log: log}
		kctx, stopKeeper := context.WithCancel(ctx)
		keeperDone := make(chan struct{})
		go func() { k.Run(kctx); close(keeperDone) }()
		defer func() { stopKeeper(); awaitStop(log, "the access keeper", func() { <-keeperDone }) }()
		cfg.permit = enginePermit(mirror)
	}

	// The rules engine starts once the mirror is synced. Its leader, and
	// only it, writes observed/clock (runClock) and compacts etcd's history
	// (server_compact.go).
	cfg.compactor = newCompactor(cfg, admin, log) // etcd lets only root compact
	if !cfg.NoEngine {
		interval := cfg.ClockInterval
		if interval <= 0 {
			interval = time.Second
		}
		cfg.Engine.WhileLeading = leaderTasks(store, interval, cfg.compactor, log)
	}
	engineDone, stopEngine, err := startEngine(ctx, cfg, store, mirror, log)
	if err != nil {
		return err
	}
	defer stopEngine()

	log.Info("server ready", "endpoints", strings.Join(endpoints, ","))
	if secureHint != "" {
		log.Info("secure: TLS with client certificates and etcd auth; clients need a certificate from the cluster's CA", "example", secureHint)
	}
	var readyErr chan error // stays nil (never ready) without a Ready hook
	if cfg.Ready != nil {
		readyErr = make(chan error, 1)
		go func() {
			if err := cfg.Ready(ctx, store, mirror); err != nil {
				readyErr <- err
			}
		}()
	}
	select {
	case err := <-readyErr:
		return err
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx))
		return nil
	case err := <-etcdErr:
		return fmt.Errorf("embedded etcd failed: %w", err)
	case err := <-engineDone:
		return fmt.Errorf("rules engine: %w", err)
	case err := <-mirrorDone:
		mirrorDone <- err // for the deferred wait
		if err == nil || errors.Is(err, context.Canceled) {
			return errors.New("mirror stopped unexpectedly")
		}
		return fmt.Errorf("mirror: %w", err)
	}
}
