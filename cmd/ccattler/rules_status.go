package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/reload"
	"github.com/spf13/cobra"
)

func init() { rulesCmdChildren = append(rulesCmdChildren, newRulesStatusCmd) }

func newRulesStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each running server's rule set: version, files, when loaded, the last rejected reload",
		Long: `Show the rule set every running server runs: its version hash, where it was
loaded from and its files, when it was loaded, how many reloads it accepted
and rejected, and the last rejected reload with its diagnostics. The server
whose engine leads (and so writes) is marked.

Each server keeps its status in etcd under {root}-ctl/status/{server}
(/ccattler-ctl/status/ by default), on a lease: a stopped server's status
disappears within seconds.`,
		Example: `  ccattler rules status
  ccattler rules status -o json | jq '.[0].version'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			sts, _, err := reload.ReadStatus(cmd.Context(), s, strings.TrimSuffix(s.Root, "/")+"-leader/")
			if err != nil {
				return err
			}
			if g.output == "json" {
				if sts == nil {
					sts = []reload.Status{}
				}
				return printJSON(cmd.OutOrStdout(), sts)
			}
			if len(sts) == 0 {
				return exitError{code: 1, err: fmt.Errorf("no server is running the rules engine against %s", strings.Join(s.Endpoints(), ","))}
			}
			out := cmd.OutOrStdout()
			for i, st := range sts {
				if i > 0 {
					fmt.Fprintln(out)
				}
				role := "standby"
				if st.Leading {
					role = "leader"
				}
				fmt.Fprintf(out, "server    %s (%s)\n", st.Server, role)
				fmt.Fprintf(out, "version   %s\n", st.Version)
				watch := ""
				if st.Watch {
					watch = " (watched)"
				}
				fmt.Fprintf(out, "source    %s%s\n", st.Source, watch)
				fmt.Fprintf(out, "rules     %d in %d files\n", st.Rules, len(st.Files))
				for _, f := range st.Files {
					fmt.Fprintf(out, "          %s\n", f)
				}
				fmt.Fprintf(out, "loaded    %s (%s ago)\n", st.LoadedAt.Format(time.RFC3339), time.Since(st.LoadedAt).Round(time.Second))
				fmt.Fprintf(out, "reloads   %d accepted, %d rejected\n", st.Reloads, st.Failures)
				if r := st.LastRejected; r != nil {
					fmt.Fprintf(out, "last rejected reload  %s (%s), %s: %s; %s kept running\n",
						r.At.Format(time.RFC3339), r.Cause, r.Version, reload.Errors(r.Errors), r.Previous)
					for _, line := range strings.Split(strings.TrimRight(r.Diagnostics, "\n"), "\n") {
						fmt.Fprintf(out, "  %s\n", line)
					}
				}
			}
			return nil
		},
	}
}
