package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"sort"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/reload"
	"github.com/spf13/cobra"
)

func init() { rulesCmdChildren = append(rulesCmdChildren, newRulesReloadCmd) }

func newRulesReloadCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Ask every running server to reload its rule set, and print each one's answer",
		Long: `Ask the running servers to load their rule set again (the --policies
directory each was started with) and print what each did:

  accepted   the set changed and passed every check; the engine takes it
             between two rounds, atomically
  unchanged  the files hold the running version: nothing changes
  rejected   the files have errors, printed with file:line:col; the running
             set keeps running

The request goes through etcd, next to the fact root rather than under it:
this command puts {root}-ctl/reload (/ccattler-ctl/reload by default), every
server watching it reloads and answers in its status key
{root}-ctl/status/{server}. So it needs only --etcd, like every other
command, and reaches every server at once. A rejection is also recorded
under event/ (rule "reload", kind "reload-rejected"); see ccattler rules
status for the last one. Exit 1 when a server rejected the set or none
answered within --timeout.

A server started with --watch reloads by itself when its files change.`,
		Example: `  ccattler rules reload
  ccattler rules reload -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			s, err := g.dial(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			req, rev, err := reload.Ask(ctx, s, whoAmI())
			if err != nil {
				return err
			}
			got, asked, werr := reload.Answers(ctx, s, req.ID, rev)
			if len(asked) == 0 {
				return exitError{code: 1, err: fmt.Errorf("no server is running the rules engine against %s (no status under %sstatus/)", strings.Join(s.Endpoints(), ","), reload.CtlPrefix(s.Root))}
			}
			var silent []string
			for _, a := range asked {
				if _, ok := got[a]; !ok {
					silent = append(silent, a)
				}
			}
			servers := make([]string, 0, len(got))
			for k := range got {
				servers = append(servers, k)
			}
			sort.Strings(servers)
			rejected := 0
			var rows []map[string]any
			for _, srv := range servers {
				res := got[srv].LastRequest
				if res.Outcome == reload.Rejected {
					rejected++
				}
				if g.output == "json" {
					rows = append(rows, map[string]any{"server": srv, "source": got[srv].Source, "result": res})
					continue
				}
				printReloadResult(cmd, srv, got[srv].Source, res)
			}
			if g.output == "json" {
				if err := printJSON(cmd.OutOrStdout(), map[string]any{"request": req.ID, "answers": rows, "silent": silent}); err != nil {
					return err
				}
			}
			if len(silent) > 0 {
				return exitError{code: 1, err: fmt.Errorf("no answer within %s from %s (%v)", timeout, strings.Join(silent, ", "), werr)}
			}
			if rejected > 0 {
				return exitError{code: 1, err: fmt.Errorf("rule set rejected by %d of %d servers; the running set keeps running", rejected, len(servers))}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the servers' answers")
	return cmd
}

func printReloadResult(cmd *cobra.Command, server, source string, res *reload.Result) {
	out := cmd.OutOrStdout()
	switch res.Outcome {
	case reload.Accepted:
		fmt.Fprintf(out, "%s: accepted %s from %s (was %s)\n", server, res.Version, source, res.Previous)
	case reload.Unchanged:
		fmt.Fprintf(out, "%s: unchanged, %s from %s is running\n", server, res.Version, source)
	default:
		fmt.Fprintf(out, "%s: rejected %s from %s (%s); %s keeps running\n", server, res.Version, source, reload.Errors(res.Errors), res.Previous)
		fmt.Fprint(cmd.ErrOrStderr(), res.Diagnostics)
	}
}

// whoAmI names the user asking, for the request and the server's log.
func whoAmI() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
