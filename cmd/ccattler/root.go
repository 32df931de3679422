package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/cobra"
)

// globals are the flags every subcommand shares.
type globals struct {
	etcd        string        // comma-separated endpoints
	root        string        // key prefix
	output      string        // table | json
	dialTimeout time.Duration // bounded wait for etcd
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
	if defEtcd == "" {
		defEtcd = "http://127.0.0.1:2379"
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.etcd, "etcd", defEtcd, "etcd endpoints, comma-separated (env CCATTLER_ETCD)")
	pf.StringVar(&g.root, "root", facts.DefaultRoot, "key prefix every fact lives under")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table or json")
	pf.DurationVar(&g.dialTimeout, "dial-timeout", 5*time.Second, "how long to wait for etcd before giving up")
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if g.output != "table" && g.output != "json" {
			return usageError("--output %q: expected table or json", g.output)
		}
		return nil
	}
	for _, mk := range subcommands {
		root.AddCommand(mk())
	}
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

// dial connects to etcd, failing after --dial-timeout with the endpoints named.
func (g *globals) dial(ctx context.Context) (*facts.Store, error) {
	return facts.Dial(ctx, facts.StoreConfig{Endpoints: g.endpoints(), Root: g.root, DialTimeout: g.dialTimeout})
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
