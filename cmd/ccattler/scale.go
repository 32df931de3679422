package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newScaleCmd) }

func newScaleCmd() *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "scale service NAME N",
		Short: "Set the number of instances a service asks for",
		Long: `Set desired/service/NAME/instances and the user's intent
(intent/user/service/NAME/instances) to N in one transaction, like an apply
of the service's file with instances = N: it is recorded in the service's
history (ccattler rollback) and under event/ (ccattler why). The next apply of
the file sets the file's count again.

A policy override (intent/policy/...) or the autoscaler, while the service
autoscales, takes precedence over the user's intent; scale says so.
--wait waits as apply --wait does.`,
		Example: `  ccattler scale service web 5
  ccattler scale service web 0 --wait   # until every instance is stopped`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 && args[0] != "service" {
				// The kind left out: "scale web 5".
				return usageError("scale %s: expected the kind first: ccattler scale service %s", strings.Join(args, " "), strings.Join(args, " "))
			}
			if len(args) != 3 || args[0] != "service" {
				return errors.New("not scale service NAME N") // withExample says what to type
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[1]
			if err := facts.CheckSegment("name", name); err != nil {
				return usageError("scale service: %v", err)
			}
			n, err := strconv.Atoi(args[2])
			if err != nil || n < 0 || n > facts.MaxInstances {
				return usageError("scale service %s %q: expected a whole number of instances from 0 to %d", name, args[2], facts.MaxInstances)
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			want, err := spec.Current(cmd.Context(), s, name)
			if err != nil {
				return err
			}
			if want == nil {
				return exitError{code: 1, err: fmt.Errorf("scale service %s: no such service (nothing under %s); apply its file first", name, facts.DesiredService(name))}
			}
			count := []byte(strconv.Itoa(n))
			want[facts.ServiceInstances(name)], want[facts.Intent("user", name)] = count, count
			res, err := spec.Set(cmd.Context(), s, name, want, spec.Options{})
			if err != nil {
				return err
			}
			if err := printResult(cmd.OutOrStdout(), res, false); err != nil {
				return err
			}
			for _, layer := range []string{"policy", "autoscaler"} {
				if f, ok, err := s.Get(cmd.Context(), facts.Intent(layer, name)); err == nil && ok && (layer == "policy" || want[facts.ServiceAutoscaleMetric(name)] != nil) {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: %s holds %s and takes precedence over the user's intent\n", f.Key, f.Value)
				}
			}
			if !wait {
				return nil
			}
			return applyWait(cmd, s, []string{name})
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the service has converged (as apply --wait)")
	// A negative count reaches the flag parser, which takes it for a
	// flag: "unknown shorthand flag: '1' in -1".
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if _, arg, ok := strings.Cut(err.Error(), "' in "); ok {
			if n, aerr := strconv.Atoi(arg); aerr == nil && n < 0 {
				// The arguments before it are parsed: "service NAME".
				return usageError("scale %s %q: expected a whole number of instances from 0 to %d", strings.Join(c.Flags().Args(), " "), arg, facts.MaxInstances)
			}
		}
		return err
	})
	return cmd
}
