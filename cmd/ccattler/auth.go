package main

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newAuthCmd) }

func newAuthCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Grant, list and revoke principals' access (auth/{principal}/rules)",
		Long: `Manage the principals of the trust boundary. Each principal's grants are
one fact, auth/{principal}/rules; the server turns them into etcd users,
roles and prefix permissions within seconds, and a principal whose rules
are removed loses its access. Only user:admin may write auth/.`,
		Args: cobra.NoArgs,
	}
	var rulesFile string
	var force bool
	add := &cobra.Command{
		Use:   "add PRINCIPAL",
		Short: "Grant a principal the default access of its kind (or --rules FILE)",
		Example: `  ccattler auth add node:node-2
  ccattler auth add user:alice
  ccattler auth add user:ci --rules ci-rules.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := args[0]
			var rules access.Rules
			var err error
			if rulesFile != "" {
				raw, rerr := os.ReadFile(rulesFile)
				if rerr != nil {
					return usageError("--rules: %v", rerr)
				}
				if rules, err = access.Parse(p, raw); err != nil {
					return usageError("--rules %s: %v", rulesFile, err)
				}
			} else if rules, err = defaultRules(p); err != nil {
				return usageError("%v", strings.TrimPrefix(err.Error(), "access: "))
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			ctx := cmd.Context() // bounded by --timeout
			// The grants are checked already (defaultRules, or reading --rules).
			txn := facts.Txn{Ops: []facts.Op{facts.Put(facts.AuthRules(p), rules.Encode())}, Checked: true}
			if !force {
				txn.If = []facts.Cond{{Key: facts.AuthRules(p), Rev: 0}}
			}
			if _, err := s.Commit(ctx, txn); errors.Is(err, facts.ErrConflict) {
				return exitError{code: 1, err: fmt.Errorf("%s has rules already (%s); --force replaces them", p, facts.AuthRules(p))}
			} else if err != nil {
				return exitError{code: 1, err: fmt.Errorf("write %s: %w", facts.AuthRules(p), err)}
			}
			if strings.HasPrefix(p, access.KindNode+":") && strings.HasSuffix(p, "*") {
				// A simulated fleet follows knobs whose types it may not
				// register itself.
				if _, err := s.Commit(ctx, sim.RegisterOps()); err != nil {
					return exitError{code: 1, err: fmt.Errorf("register the simulated fleet's knobs: %w", err)}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d grants written to %s\n", p, len(rules), facts.AuthRules(p))
			return nil
		},
	}
	add.Flags().StringVar(&rulesFile, "rules", "", "JSON file of grants instead of the kind's defaults")
	add.Flags().BoolVar(&force, "force", false, "replace rules the principal has")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the principals and what they may write",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			ctx := cmd.Context() // bounded by --timeout
			fs, _, err := s.List(ctx, "auth/", 0)
			if err != nil {
				return exitError{code: 1, err: err}
			}
			type row struct {
				Principal string       `json:"principal"`
				Rules     access.Rules `json:"rules,omitempty"`
				Invalid   string       `json:"invalid,omitempty"`
			}
			var rows []row
			for _, f := range fs {
				p, ok := access.PrincipalOf(f.Key)
				if !ok {
					continue
				}
				r, err := access.Parse(p, f.Value)
				rw := row{Principal: p, Rules: r}
				if err != nil {
					rw.Invalid = err.Error()
				}
				rows = append(rows, rw)
			}
			sort.Slice(rows, func(i, j int) bool { return rows[i].Principal < rows[j].Principal })
			if g.output == "json" {
				return printJSON(cmd.OutOrStdout(), rows)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PRINCIPAL\tWRITES")
			for _, r := range rows {
				w := strings.Join(r.Rules.Writes(), " ")
				if r.Invalid != "" {
					w = "INVALID: " + r.Invalid
				}
				fmt.Fprintf(tw, "%s\t%s\n", r.Principal, w)
			}
			return tw.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm PRINCIPAL",
		Short: "Revoke a principal: its rules are deleted and etcd stops accepting it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			ctx := cmd.Context() // bounded by --timeout
			existed, err := s.Remove(ctx, facts.AuthRules(args[0]))
			if err != nil {
				return exitError{code: 1, err: err}
			}
			if !existed {
				return exitError{code: 1, err: fmt.Errorf("%s has no rules (%s)", args[0], facts.AuthRules(args[0]))}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: rules deleted; the server revokes its access within seconds\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(add, list, rm)
	return cmd
}

// defaultRules are a new principal's rules under the default root.
func defaultRules(p string) (access.Rules, error) {
	if p == access.KindEngine {
		return builtinAccess(g.root, engine.DefaultLeaderPrefix(g.root))[p], nil
	}
	return access.Default(p, reload.CtlPrefix(g.root), engine.DefaultLeaderPrefix(g.root))
}
