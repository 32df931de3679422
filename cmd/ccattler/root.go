package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/spf13/cobra"
)

// globals are the flags every subcommand shares.
type globals struct {
	etcd        string        // comma-separated endpoints
	root        string        // key prefix
	output      string        // table | json
	dialTimeout time.Duration // bounded wait for etcd
	tls         tlsFlags
	etcdGiven   bool     // --etcd or CCATTLER_ETCD was set
	dialled     []string // the endpoints connection resolved last (https:// when TLS was found), for messages
	actedAs     string   // the principal connection resolved last ("" without TLS), for messages
	// timeout bounds every client command (deadline.go); deadlined says
	// this one runs under it, cancelDeadline releases it.
	timeout        time.Duration
	deadlined      bool
	cancelDeadline func()

	context string // --context: the client configuration's context to use (clientconfig.go)
}

var g = &globals{}

// subcommands register themselves here from their own files (one file per subcommand).
var subcommands []func() *cobra.Command

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ccattler",
		Short: "A container orchestrator whose control plane is a rules engine",
		Long: `CCattler keeps the world as flat facts in etcd under /ccattler/ and runs every
controller — intent resolution, scheduling, endpoints, failure handling — as
CEL-guarded rules in HCL files.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	defEtcd := os.Getenv("CCATTLER_ETCD")
	g.etcdGiven = defEtcd != ""
	if defEtcd == "" {
		defEtcd = defaultEtcdPlain
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.etcd, "etcd", defEtcd, "etcd endpoints, comma-separated (env CCATTLER_ETCD)")
	pf.StringVar(&g.root, "root", facts.DefaultRoot, "key prefix every fact lives under")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json (get and describe: also yaml, wide, name)")
	pf.DurationVar(&g.dialTimeout, "dial-timeout", 5*time.Second, "how long to wait for etcd before giving up")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "how long a command may take, its requests to etcd included (0: no limit; server, agent and watches run until stopped)")
	pf.StringVar(&g.tls.cacert, "cacert", os.Getenv("CCATTLER_CACERT"), "CA certificate that signed etcd's serving certificate (env CCATTLER_CACERT)")
	pf.StringVar(&g.tls.cert, "cert", os.Getenv("CCATTLER_CERT"), "client certificate: its Common Name is the principal (env CCATTLER_CERT)")
	pf.StringVar(&g.tls.key, "key", os.Getenv("CCATTLER_KEY"), "key of --cert (env CCATTLER_KEY)")
	pf.StringVar(&g.tls.dir, "tls-dir", os.Getenv("CCATTLER_TLS_DIR"),
		"directory of ca.crt and PRINCIPAL.crt/.key made by ccattler certs (env CCATTLER_TLS_DIR; default: "+serverPKI+" when it exists)")
	pf.StringVar(&g.tls.identity, "identity", os.Getenv("CCATTLER_IDENTITY"),
		"principal whose certificate in --tls-dir to use (env CCATTLER_IDENTITY; default user:admin, node:{id} for agents, root for server)")
	pf.StringVar(&g.context, "context", "", "context of the client configuration to use (env CCATTLER_CONTEXT; see ccattler config)")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		ranCommand = true // past cobra's own flag and argument checks (exitcodes.go)
		if cmd.Flags().Changed("etcd") {
			g.etcdGiven = true
		}
		if err := applyContext(cmd); err != nil {
			return err
		}
		if err := checkOutput(cmd); err != nil {
			return err
		}
		withDeadline(cmd)
		return nil
	}
	for _, mk := range subcommands {
		root.AddCommand(mk())
	}
	strictUsage(root)
	setVersion(root)
	registerCompletions(root)
	return root
}

// endpoints splits the --etcd flag.
func (g *globals) endpoints() []string {
	var out []string
	for _, e := range strings.Split(g.etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// dial connects to etcd as the user the flags name (user:admin unless
// --identity or --cert says otherwise), failing after --dial-timeout with
// the endpoints named.
func (g *globals) dial(ctx context.Context) (*facts.Store, error) {
	return g.dialAs(ctx, access.Admin)
}

// dialAs is dial with another default principal.
func (g *globals) dialAs(ctx context.Context, identity string) (*facts.Store, error) {
	tlsCfg, eps, err := g.connection(identity)
	if err != nil {
		return nil, err
	}
	return facts.Dial(ctx, facts.StoreConfig{Endpoints: eps, Root: g.root, DialTimeout: g.dialTimeout, TLS: tlsCfg})
}

// connection resolves the TLS configuration and endpoints of the flags.
func (g *globals) connection(identity string) (*tls.Config, []string, error) {
	eps := g.endpoints()
	httpsOnly := len(eps) > 0
	for _, e := range eps {
		httpsOnly = httpsOnly && strings.HasPrefix(e, "https://")
	}
	tlsCfg, principal, err := g.tls.resolve(identity, g.etcdGiven, httpsOnly)
	if err != nil {
		return nil, nil, err
	}
	if tlsCfg != nil {
		g.actedAs = principal
	}
	eps, err = secureEndpoints(eps, tlsCfg != nil)
	if err != nil {
		return nil, nil, err
	}
	g.dialled = eps
	return tlsCfg, eps, nil
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	return nil
}
