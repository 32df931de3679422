package main

import (
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newWhyCmd) }

func newWhyCmd() *cobra.Command {
	var depth int
	cmd := &cobra.Command{
		Use:   "why KEY",
		Short: "Explain why a fact holds: the rule firing that wrote it, and why its inputs held",
		Long: `Explain the current value of KEY (relative to the root, e.g.
endpoint/service/web/a8f31): the firing record committed with it — rule,
rule-set version, bindings, time — and, recursively, why each fact that firing
read held, down to facts a user applied or an agent reported. A record past
retention is said to be so.

The values of the facts a firing read come from etcd's history, which the
server compacts (ccattler server --compact-every, default 5m, keeping one
interval of it). For an older firing why prints what it still can — the
firing records are current keys, so which rule wrote what with which
bindings stays — marks each value that is gone "(value compacted)", names
the revision history before which was compacted, and exits 1.`,
		Example: `  ccattler why endpoint/service/web/a8f31
  ccattler why placement/instance/a8f31 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key := strings.TrimPrefix(args[0], g.root)
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			if _, err := s.Schema.Parse(key); err != nil {
				return usageError("%v", err)
			}
			tree, err := audit.Why(cmd.Context(), s, key, audit.WhyOptions{MaxDepth: depth})
			if err != nil {
				return err
			}
			if g.output == "json" {
				if err := printJSON(cmd.OutOrStdout(), audit.ToGraph(tree)); err != nil {
					return err
				}
			} else {
				audit.PrintTree(cmd.OutOrStdout(), tree)
			}
			return compactedError(tree)
		},
	}
	cmd.Flags().IntVar(&depth, "depth", 32, "how many firings deep to follow")
	return cmd
}

// compactedError is why's failure when etcd's history no longer holds some
// value the explanation needs: the tree is printed all the same.
func compactedError(tree *audit.Node) error {
	rev, n := audit.Compacted(tree)
	if n == 0 {
		return nil
	}
	return exitError{code: 1, err: fmt.Errorf("etcd's history before revision %d was compacted: the values of %d %s read at older revisions are gone (marked \"(value compacted)\", compacted_before in -o json); "+
		"the firing records above are current and still say which rule wrote what. The engine leader compacts every --compact-every (ccattler server, default 5m), keeping one interval: "+
		"ask why within it, or run the server with a longer --compact-every", rev, n, plural(n, "fact version", "fact versions"))}
}
