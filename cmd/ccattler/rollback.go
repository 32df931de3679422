package main

import (
	"bytes"
	"fmt"
	"maps"
	"text/tabwriter"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newRollbackCmd) }

func newRollbackCmd() *cobra.Command {
	var to string
	var list, wait, dryRun bool
	cmd := &cobra.Command{
		Use:   "rollback service NAME [--to ID] [--list]",
		Short: "Put a service back to the spec applied before the current one",
		Long: fmt.Sprintf(`Every apply (and scale) that changes a service keeps the service's whole
spec in its history, desired/history/service/NAME/ID, in the same
transaction; the last %d are kept. rollback applies the newest one that
differs from what the service holds now (or --to ID), as an apply of its
file would: the desired facts and the user's intent, in one transaction,
itself recorded in the history (so a second rollback undoes the first).

--list shows the history, the entry the service holds now marked with *.
An entry that names a key outside the service or holds an invalid value is
refused by key (the history is user-written, like desired/).`, spec.HistoryKeep),
		Example: `  ccattler rollback service web
  ccattler rollback service web --list
  ccattler rollback service web --to 20261201T101500.000000001Z-000042 --wait`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 || args[0] != "service" {
				return usageError("rollback: expected: rollback service NAME")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[1]
			if err := facts.CheckSegment("name", name); err != nil {
				return usageError("rollback service: %v", err)
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			revs, err := spec.History(cmd.Context(), s, name)
			if err != nil {
				return exitError{code: 1, err: fmt.Errorf("rollback service %s: %w", name, err)}
			}
			now, err := spec.Current(cmd.Context(), s, name)
			if err != nil {
				return err
			}
			if list {
				return printHistory(cmd, name, revs, now)
			}
			if len(revs) == 0 {
				return exitError{code: 1, err: fmt.Errorf("rollback service %s: no history under %s: it was never applied by this version of ccattler", name, facts.ServiceHistory(name, ""))}
			}
			var target *spec.Revision
			for i := len(revs) - 1; i >= 0; i-- {
				if (to == "" && !sameSpec(revs[i].Facts, now)) || (to != "" && revs[i].ID == to) {
					target = &revs[i]
					break
				}
			}
			if target == nil {
				if to != "" {
					return usageError("rollback service %s --to %s: no such entry (see ccattler rollback service %s --list)", name, to, name)
				}
				return exitError{code: 1, err: fmt.Errorf("rollback service %s: every entry of its history is what it holds now: nothing to go back to", name)}
			}
			want := map[string][]byte{}
			for k, v := range target.Facts {
				want[k] = v
			}
			res, err := spec.Set(cmd.Context(), s, name, want, spec.Options{DryRun: dryRun})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "rollback of %s to %s (applied by %s)\n", name, target.ID, target.Event)
			if err := printResult(cmd.OutOrStdout(), res, dryRun); err != nil || !wait || dryRun {
				return err
			}
			return applyWait(cmd, s, []string{name})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the history entry to restore (default: the newest that differs from now)")
	cmd.Flags().BoolVar(&list, "list", false, "list the service's history instead")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the changes that would be made, write nothing")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the service has converged (as apply --wait)")
	return cmd
}

// sameSpec says whether a history entry is what the service holds now.
func sameSpec(entry map[string]facts.RawJSON, now map[string][]byte) bool {
	return maps.EqualFunc(entry, now, func(a facts.RawJSON, b []byte) bool { return bytes.Equal(a, b) })
}

func printHistory(cmd *cobra.Command, name string, revs []spec.Revision, now map[string][]byte) error {
	type row struct {
		ID        string                   `json:"id"`
		Event     string                   `json:"event"`
		Current   bool                     `json:"current"`
		Image     facts.RawJSON            `json:"image,omitempty"`
		Instances facts.RawJSON            `json:"instances,omitempty"`
		Facts     map[string]facts.RawJSON `json:"facts"`
	}
	rows := []row{}
	for _, r := range revs {
		rows = append(rows, row{ID: r.ID, Event: r.Event, Current: sameSpec(r.Facts, now),
			Image: r.Facts[facts.ServiceImage(name)], Instances: r.Facts[facts.ServiceInstances(name)], Facts: r.Facts})
	}
	if g.output == "json" {
		return printJSON(cmd.OutOrStdout(), rows)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENT\tID\tIMAGE\tINSTANCES")
	for _, r := range rows {
		mark := ""
		if r.Current {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, r.ID, display(r.Image), display(r.Instances))
	}
	return tw.Flush()
}
