package main

import (
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
retention is said to be so.`,
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
				return printJSON(cmd.OutOrStdout(), audit.ToGraph(tree))
			}
			audit.PrintTree(cmd.OutOrStdout(), tree)
			return nil
		},
	}
	cmd.Flags().IntVar(&depth, "depth", 32, "how many firings deep to follow")
	return cmd
}
