package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/engine/whatif"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
)

func init() { rulesCmdChildren = append(rulesCmdChildren, newRulesPlanCmd) }

func newRulesPlanCmd() *cobra.Command {
	var against string
	var with []string
	var seed uint64
	var all bool
	cmd := &cobra.Command{
		Use:   "plan [DIR] [--with FILE]",
		Short: "Show what the rule set in DIR would do differently from the running one, on the live facts; write nothing",
		Long: `Evaluate the rule set in DIR against the live facts without writing anything,
and print what it would do differently from the running rule set: the keys it
would put, change or delete, grouped by the rule that would write them.

Both rule sets run on private in-memory copies of the facts, read at one
revision: every rule, every plan's writes applied to the copy and evaluated
again, to a fixpoint — what the engine would do, without the nodes' agents.
Keys on which the two end up the same are not shown, so on a cluster the
running set has converged, DIR = the running set's files plans nothing.

  + key = value                    DIR would write it; the running set would not
  ~ key = value (running: value)   both would; with different values
  - key (running: value)           the running set would have it; DIR would not

A rule that would change more than 10 keys shows its first 10 and counts the
rest by kind of key; --all lists every key, as -o json does.

What "the running set" is: --against DIR2; without it, the directory the
leading server runs (ccattler rules status) when it is readable here and
still holds the running version, else the default policies built into this
binary. When the set compared with is not the running version, a note says so.

--with FILE plans a service change instead, or as well: alone, it shows what
the running rules would do because of applying FILE (the same plan as
ccattler diff -f FILE); with DIR, both sets run on the facts with FILE
applied, so a rule change can be tried on a service that is not there yet.

A rule set that does not load prints its problems with file:line:col and
exits 1; otherwise the exit status is 0, with or without differences.`,
		Example: `  # a scheduler that packs instead of spreading, against what the servers run
  ccattler rules plan ./my-policies

  # against the directory the server runs
  ccattler rules plan ./next --against /etc/ccattler/policies -o json

  # what the running rules would do with web.hcl applied
  ccattler rules plan --with web.hcl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(with) == 0 {
				return usageError("rules plan: expected DIR, or --with FILE to plan a service change under the running rules")
			}
			var doc *spec.Doc
			if len(with) > 0 {
				var err error
				if doc, err = readDoc(cmd, with); err != nil {
					return err
				}
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			var snapshot []facts.Fact
			var rev int64
			var schema *facts.Schema
			var w applied
			if doc != nil {
				// The sets run on the facts with the apply in them.
				if w, err = withApply(cmd, s, doc, with); err != nil {
					return err
				}
				snapshot, rev, schema = w.after, w.res.Rev, w.schema
			} else {
				if snapshot, rev, err = s.List(cmd.Context(), "", 0); err != nil {
					return fmt.Errorf("read the facts: %w", err)
				}
				// Plugin types registered under schema/ type the rules too.
				schema = planSchema(snapshot)
			}
			if !cmd.Flags().Changed("against") {
				against = runningSource(cmd, s)
			}
			runningName := policiesName(against)
			running, err := loadPlanSet(cmd, against, schema)
			if err != nil {
				return err
			}
			if len(args) == 0 { // --with alone: what the running rules do because of the change
				d := whatif.WithChange(w.before, w.after, rev, running, whatif.Options{Seed: seed})
				return printApplyPlan(cmd.OutOrStdout(), strings.Join(with, ", "), runningName, w.res, d, keyListing{all: all, schema: schema})
			}
			dir := args[0]
			next, err := loadPlanSet(cmd, dir, schema)
			if err != nil {
				return err
			}
			if sts, _, err := reload.ReadStatus(cmd.Context(), s, strings.TrimSuffix(s.Root, "/")+"-leader/"); err == nil {
				for _, st := range sts {
					if st.Leading && st.Version != running.Version {
						fmt.Fprintf(cmd.ErrOrStderr(), "note: the leading server %s runs version %s from %s; comparing with %s, version %s (see --against)\n",
							st.Server, st.Version, st.Source, runningName, running.Version)
					}
				}
			}
			if doc != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: both sets run on the facts with %s applied (%d %s; nothing written)\n",
					strings.Join(with, ", "), len(w.res.Changes), plural(len(w.res.Changes), "change", "changes"))
			}
			d := whatif.Compare(snapshot, rev, running, next, whatif.Options{Seed: seed})
			if g.output == "json" {
				if d.Changes == nil {
					d.Changes = []whatif.KeyDiff{}
				}
				return printJSON(cmd.OutOrStdout(), map[string]any{"dir": dir, "against": runningName, "plan": d, "written": false})
			}
			printPlan(cmd.OutOrStdout(), dir, runningName, d, keyListing{all: all, schema: schema})
			return nil
		},
	}
	cmd.Flags().StringVar(&against, "against", "", "rule directory standing for the running set (default: the leading server's directory if readable here, else the built-in policies)")
	cmd.Flags().StringArrayVar(&with, "with", nil, "a service or volume file (or directory) to plan as applied: alone, what the running rules would do because of it (as ccattler diff); with DIR, both sets run on the facts with it applied (repeatable)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the fresh ids both sets draw, so that the rules they share create the same ids")
	cmd.Flags().BoolVar(&all, "all", false, "list every key the rules would change (default: the first 10 of each rule, the rest counted by kind of key)")
	return cmd
}

// loadPlanSet loads dir (empty: the built-in policies) with schema, or
// prints its problems and returns an exit-1 error.
func loadPlanSet(cmd *cobra.Command, dir string, schema *facts.Schema) (*rules.RuleSet, error) {
	var rs *rules.RuleSet
	var files map[string]*hcl.File
	var diags hcl.Diagnostics
	if dir == "" {
		rs, files, diags = rules.LoadFilesWithSources(builtinPolicies(), rules.WithSchema(schema))
	} else {
		rs, files, diags = rules.LoadWithFiles(dir, rules.WithSchema(schema))
	}
	if diags.HasErrors() {
		writeDiags(cmd.ErrOrStderr(), files, diags)
		return nil, exitError{code: 1, err: fmt.Errorf("rule set %s rejected: %s; nothing planned", policiesName(dir), countErrors(diags))}
	}
	return rs, nil
}

func printPlan(out io.Writer, dir, against string, d whatif.Diff, l keyListing) {
	fmt.Fprintf(out, "Plan of %s (version %s) against %s (version %s), on %d facts at revision %d.\n",
		dir, d.Next.Version, against, d.Running.Version, d.Facts, d.Rev)
	printPlanProblems(out, []namedOutcome{{dir, d.Next}, {against, d.Running}})
	if len(d.Changes) == 0 {
		fmt.Fprintf(out, "\nNo changes: %s would do the same as %s on these facts. Nothing was written.\n", dir, against)
		return
	}
	printKeyDiffs(out, d, "running", l)
	fmt.Fprintf(out, "\nPlan: %s. Nothing was written.\n", d)
}

// runningSource guesses the directory of the running set: the leading
// server's --policies directory when this machine can read it and its files
// are still the running version; otherwise "" (the built-in policies).
func runningSource(cmd *cobra.Command, s *facts.Store) string {
	sts, _, err := reload.ReadStatus(cmd.Context(), s, strings.TrimSuffix(s.Root, "/")+"-leader/")
	if err != nil {
		return ""
	}
	for _, st := range sts {
		if !st.Leading || st.Source == policiesName("") {
			continue
		}
		if srcs, diags := reload.ReadDir(st.Source); !diags.HasErrors() && reload.Version(srcs) == st.Version {
			return st.Source
		}
	}
	return ""
}
