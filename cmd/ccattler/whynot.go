package main

import (
	"fmt"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newWhyNotCmd) }

func newWhyNotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "why-not instance ID",
		Short: "Say why an instance is not placed: every node and the filters that rejected it",
		Long: `For an instance that stays pending, print the scheduler's last rejection
record: every candidate node with every filter it failed (alive,
architecture, zone, cpu, memory, or whatever the running policy names).`,
		Example: `  ccattler why-not instance a8f31
  ccattler why-not instance a8f31 -o json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "instance" {
				return usageError("why-not %s: expected `why-not instance ID`", args[0])
			}
			id := args[1]
			if err := facts.CheckSegment("instance-id", id); err != nil {
				return usageError("%v", err)
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			if p, ok, err := s.Get(cmd.Context(), facts.Placement(id)); err != nil {
				return err
			} else if ok {
				fmt.Fprintf(cmd.OutOrStdout(), "instance %s is placed on %s (see `ccattler why %s`)\n", id, p.Value, p.Key)
				return nil
			}
			e, ok, err := audit.WhyNot(cmd.Context(), s, "id", id)
			if err != nil {
				return err
			}
			if !ok {
				if _, exists, _ := s.Get(cmd.Context(), facts.InstanceService(id)); !exists {
					return fmt.Errorf("instance %s does not exist", id)
				}
				return fmt.Errorf("no rejection is recorded for instance %s: it may not have been considered yet", id)
			}
			if g.output == "json" {
				return printJSON(cmd.OutOrStdout(), e)
			}
			audit.PrintRejection(cmd.OutOrStdout(), e)
			return nil
		},
	}
	return cmd
}
