package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newRulesCmd) }

// rulesCmdChildren holds further `ccattler rules` subcommands (plan,
// status, reload) that live in their own files: each appends its
// constructor here from init().
var rulesCmdChildren []func() *cobra.Command

func newRulesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Check and test rule sets",
		Long: `Work on rule sets: directories of HCL rule files (*.hcl) with their tests
(*_test.hcl, tests/*.hcl or testdata/*.hcl). See docs/rules.md for the language.`,
	}
	cmd.AddCommand(newRulesCheckCmd(), newRulesTestCmd())
	for _, mk := range rulesCmdChildren {
		cmd.AddCommand(mk())
	}
	return cmd
}

func newRulesCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check DIR",
		Short: "Load, type-check and order a rule set; print every problem at once",
		Long: `Load every rule file of DIR (*.hcl, not *_test.hcl), compile its CEL
expressions against the fact schema and run the set-wide checks: unknown key
forms, unbound variables, two rules writing one key form without an order,
cycles through negation, writes outside a rule's principal.

Sound: one line (rules, files, version) and exit 0. Otherwise every problem
with file:line:col and a caret under the token, and exit 1.`,
		Example: `  ccattler rules check policies/
  ccattler rules check engine/eval/testdata/choice`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rs, files, diags := rules.LoadWithFiles(args[0])
			if diags.HasErrors() {
				writeDiags(cmd.ErrOrStderr(), files, diags)
				return exitError{code: 1, err: fmt.Errorf("rule set %s rejected: %s", args[0], countErrors(diags))}
			}
			writeDiags(cmd.ErrOrStderr(), files, diags) // warnings
			if g.output == "json" {
				return printJSON(cmd.OutOrStdout(), map[string]any{
					"dir": args[0], "rules": len(rs.Rules), "files": len(rs.Files), "version": rs.Version,
				})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d rules in %d files, version %s\n", args[0], len(rs.Rules), len(rs.Files), rs.Version)
			return nil
		},
	}
}

func newRulesTestCmd() *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "test DIR",
		Short: "Run a rule set's tests: facts in, run to a fixpoint, expected writes out",
		Long: `Run the rule tests of DIR (DIR/*_test.hcl, DIR/tests/*.hcl and DIR/testdata/*.hcl) against the
rule set of DIR. Each test gives facts, runs the rules to a fixpoint on an
in-memory table (applying each plan's writes and re-evaluating incrementally),
and compares the net writes, deletes, firings per rule, problems and choice
rejections with its expect block; '*' in a key matches one segment (a fresh id).
"then" steps change facts and expect again. A failure prints the expected and
actual difference; any failure exits 1.`,
		Example: `  ccattler rules test policies/
  ccattler rules test engine/eval/testdata/choice --run capacity`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			rs, files, diags := rules.LoadWithFiles(dir)
			if diags.HasErrors() {
				writeDiags(cmd.ErrOrStderr(), files, diags)
				return exitError{code: 1, err: fmt.Errorf("rule set %s rejected: %s", dir, countErrors(diags))}
			}
			paths, err := ruletest.Find(dir)
			if err != nil {
				return err
			}
			if len(paths) == 0 {
				return exitError{code: 1, err: fmt.Errorf("%s has no rule tests: expected *_test.hcl, tests/*.hcl or testdata/*.hcl", dir)}
			}
			tests, tfiles, diags := ruletest.Parse(paths, rs.Schema)
			if diags.HasErrors() {
				writeDiags(cmd.ErrOrStderr(), tfiles, diags)
				return exitError{code: 1, err: fmt.Errorf("rule tests rejected: %s", countErrors(diags))}
			}
			writeDiags(cmd.ErrOrStderr(), tfiles, diags) // warnings (an unused world): the tests still run
			out := cmd.OutOrStdout()
			failed, ran := 0, 0
			var results []map[string]any
			for _, t := range tests {
				if run != "" && !strings.Contains(t.Name, run) {
					continue
				}
				ran++
				res := ruletest.Run(rs, t)
				if g.output == "json" {
					results = append(results, map[string]any{"test": t.Name, "file": t.File,
						"passed": res.Passed(), "failures": res.Failures, "firings": res.Firings})
				}
				if !res.Passed() {
					failed++
					if g.output != "json" {
						fmt.Fprintf(out, "FAIL %s\n%s\n", t.Name, strings.Join(res.Failures, "\n"))
					}
					continue
				}
				if g.output != "json" {
					fmt.Fprintf(out, "ok   %s\n", t.Name)
				}
			}
			if g.output == "json" {
				if err := printJSON(out, map[string]any{"version": rs.Version, "tests": results}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%d tests, %d failed (rule set %s)\n", ran, failed, rs.Version)
			}
			if failed > 0 {
				return exitError{code: 1, err: fmt.Errorf("%d of %d rule tests failed", failed, ran)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run only the tests whose name contains this text")
	return cmd
}

// writeDiags prints diagnostics with file:line:col, the source line and a
// caret under the token.
func writeDiags(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) {
	_ = rules.WriteDiagnostics(w, files, diags)
}

func countErrors(diags hcl.Diagnostics) string {
	n := 0
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			n++
		}
	}
	if n == 1 {
		return "1 error"
	}
	return fmt.Sprintf("%d errors", n)
}
