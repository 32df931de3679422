package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/ccattler/ccattler/engine/whatif"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newDiffCmd) }

func newDiffCmd() *cobra.Command {
	var files []string
	var policiesDir string
	var seed uint64
	var all bool
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR [-f ...]",
		Short: "Show what an apply would write and what the rules would then do; write nothing",
		Long: `Show what ccattler apply -f would write, and what the rules would then do
because of it: the instances they would create or stop, where they would place
them, the endpoints and counts they would change.

The apply is made on a private copy of the live facts (read at one
revision), and the running rule set is run on that copy and on the facts
without it, each to a fixpoint, as ccattler rules plan does: what differs is
what the apply sets in motion. The nodes' agents are not simulated, so the
plan stops where an agent would start a container.

  + key = value              the rules would write it because of the apply
  ~ key = value (now: value) they would write another value than without it
  - key (now: value)         they would delete it because of the apply

A rule that would change more than 10 keys shows its first 10 and counts the
rest by kind of key, "… and 99,990 more (--all lists them): 99,990 × -
placement/instance/{instance-id}"; --all lists every key, as -o json does.

The rule set is the running one (as rules plan finds it), or --policies DIR.
A file with a mistake is rejected as apply rejects it (file:line:col, exit 1).
The exit status is 0 with or without differences.`,
		Example: `  ccattler diff -f web.hcl
  ccattler diff -f services/ -o json
  ccattler diff -f web.hcl --policies ./next-policies`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return usageError("diff: no files: give -f FILE or -f DIR (see ccattler diff --help)")
			}
			doc, err := readDoc(cmd, files)
			if err != nil {
				return err
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := withApply(cmd, s, doc, files)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("policies") {
				policiesDir = runningSource(cmd, s)
			}
			rs, err := loadPlanSet(cmd, policiesDir, w.schema)
			if err != nil {
				return err
			}
			d := whatif.WithChange(w.before, w.after, w.res.Rev, rs, whatif.Options{Seed: seed})
			return printApplyPlan(cmd.OutOrStdout(), strings.Join(files, ", "), policiesName(policiesDir), w.res, d, keyListing{all: all, schema: w.schema})
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a file, or a directory of *.hcl files (repeatable)")
	cmd.Flags().StringVar(&policiesDir, "policies", "", "rule directory to plan with (default: the running set, as rules plan finds it)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the fresh ids the rules draw")
	cmd.Flags().BoolVar(&all, "all", false, "list every key the rules would change (default: the first 10 of each rule, the rest counted by kind of key)")
	return cmd
}

// readDoc reads and decodes the files as apply does: a mistake prints
// every problem as file:line:col and is an exit-1 error.
func readDoc(cmd *cobra.Command, files []string) (*spec.Doc, error) {
	doc, warnings, err := decodeFiles(cmd, files)
	if err == nil {
		_ = spec.WriteDiagnostics(cmd.ErrOrStderr(), doc.Files, warnings)
	}
	return doc, err
}

// decodeFiles is readDoc without printing the warnings: it returns them.
func decodeFiles(cmd *cobra.Command, files []string) (*spec.Doc, hcl.Diagnostics, error) {
	srcs, err := spec.ReadFiles(files)
	if err != nil {
		return nil, nil, err
	}
	doc, diags := spec.Decode(srcs...)
	if diags.HasErrors() {
		_ = spec.WriteDiagnostics(cmd.ErrOrStderr(), doc.Files, diags)
		return nil, nil, exitError{code: 1, err: fmt.Errorf("%s rejected (%d %s); nothing was written",
			strings.Join(files, ", "), len(diags.Errs()), plural(len(diags.Errs()), "problem", "problems"))}
	}
	return doc, diags, nil
}

// applied is the live facts without and with an apply, at one revision.
type applied struct {
	res           spec.Result // the apply's changes, as a dry run computes them
	before, after []facts.Fact
	schema        *facts.Schema // with the plugin types the facts register
}

// withApply computes doc's apply as a dry run and the facts at its
// revision with and without it. A refused apply prints why, as apply does.
func withApply(cmd *cobra.Command, s *facts.Store, doc *spec.Doc, files []string) (applied, error) {
	ctx := cmd.Context()
	res, err := spec.Apply(ctx, s, doc, spec.Options{DryRun: true})
	var refused *spec.RefusedError
	if errors.As(err, &refused) {
		_ = spec.WriteDiagnostics(cmd.ErrOrStderr(), doc.Files, refused.Diags)
		return applied{}, exitError{code: 1, err: fmt.Errorf("%s refused (%d %s); nothing planned",
			strings.Join(files, ", "), len(refused.Diags), plural(len(refused.Diags), "problem", "problems"))}
	}
	if err != nil {
		return applied{}, err
	}
	before, err := snapshotAt(ctx, s, res.Rev)
	if err != nil {
		return applied{}, err
	}
	return applied{res: res, before: before, after: applyChanges(before, res.Changes, res.Rev), schema: planSchema(before)}, nil
}

func snapshotAt(ctx context.Context, s *facts.Store, rev int64) ([]facts.Fact, error) {
	fs, _, err := s.List(ctx, "", rev)
	if err != nil {
		return nil, fmt.Errorf("read the facts: %w", err)
	}
	return fs, nil
}

// planSchema is the schema the facts are typed by: the built-in types and
// the plugin types registered under schema/ (the table registers them as
// it takes the facts), for loading rule sets to run on them.
func planSchema(snapshot []facts.Fact) *facts.Schema {
	schema := facts.NewSchema()
	tb := facts.NewTable(schema)
	for _, f := range snapshot {
		tb.Put(f)
	}
	return schema
}

// applyChanges returns a copy of snapshot with the changes made at rev.
func applyChanges(snapshot []facts.Fact, changes []spec.Change, rev int64) []facts.Fact {
	idx := map[string]int{}
	out := make([]facts.Fact, 0, len(snapshot)+len(changes))
	for _, f := range snapshot {
		idx[f.Key] = len(out)
		out = append(out, f)
	}
	gone := map[string]bool{}
	for _, c := range changes {
		switch c.Op {
		case spec.OpDelete:
			gone[c.Key] = true
		case spec.OpChange:
			out[idx[c.Key]].Value, out[idx[c.Key]].ModRevision = c.New, rev
		default:
			out = append(out, facts.Fact{Key: c.Key, Value: c.New, ModRevision: rev, CreateRevision: rev})
		}
	}
	if len(gone) == 0 {
		return out
	}
	kept := out[:0]
	for _, f := range out {
		if !gone[f.Key] {
			kept = append(kept, f)
		}
	}
	return kept
}

// planSummary counts what a plan does to instances.
type planSummary struct {
	Created    int `json:"instances_created"`
	Stopped    int `json:"instances_stopped"`
	Placements int `json:"placements"`
}

func summarize(d whatif.Diff) planSummary {
	var n planSummary
	for _, c := range d.Changes {
		inst, isInst := strings.CutPrefix(c.Key, "observed/instance/")
		switch {
		case isInst && strings.HasSuffix(inst, "/service") && c.Op == whatif.Put:
			n.Created++
		case isInst && strings.HasSuffix(inst, "/state") && c.Op != whatif.Delete && string(c.Value) == `"stopped"`:
			n.Stopped++
		case strings.HasPrefix(c.Key, "placement/instance/") && c.Op == whatif.Delete:
			n.Stopped++ // its agent stops an instance that loses its placement
		case strings.HasPrefix(c.Key, "placement/instance/"):
			n.Placements++
		}
	}
	return n
}

func (n planSummary) String() string {
	return fmt.Sprintf("%d %s created, %d stopped, %d %s", n.Created, plural(n.Created, "instance", "instances"),
		n.Stopped, n.Placements, plural(n.Placements, "placement", "placements"))
}

// printApplyPlan prints what an apply would write and what rs would then do.
func printApplyPlan(out io.Writer, files, rulesName string, res spec.Result, d whatif.Diff, l keyListing) error {
	sum := summarize(d)
	if g.output == "json" {
		changes := []changeJSON{}
		for _, c := range res.Changes {
			changes = append(changes, changeJSON{Op: opNames[c.Op], Key: c.Key, Old: jsonValue(c.Old), New: jsonValue(c.New)})
		}
		if d.Changes == nil {
			d.Changes = []whatif.KeyDiff{}
		}
		return printJSON(out, map[string]any{"files": files, "rules": rulesName, "revision": res.Rev,
			"apply": changes, "plan": d, "summary": sum, "written": false})
	}
	fmt.Fprintf(out, "The apply of %s would write, on %d facts at revision %d:\n", files, d.Facts, res.Rev)
	if len(res.Changes) == 0 {
		fmt.Fprintln(out, "  nothing: the store holds the files already")
	}
	for _, c := range res.Changes {
		fmt.Fprintf(out, "  %s\n", c)
	}
	fmt.Fprintf(out, "\nThen the rules of %s (version %s) would:\n", rulesName, d.Next.Version)
	printPlanProblems(out, []namedOutcome{{"with the apply", d.Next}, {"without it", d.Running}})
	if len(d.Changes) == 0 {
		fmt.Fprintln(out, "  do nothing more")
	}
	printKeyDiffs(out, d, "now", l)
	fmt.Fprintf(out, "\nPlan: %s; %s. Nothing was written.\n", sum, d)
	return nil
}

type namedOutcome struct {
	name string
	o    whatif.Outcome
}

// printPlanProblems warns of a run without a fixpoint or with evaluation problems.
func printPlanProblems(out io.Writer, os []namedOutcome) {
	for _, o := range os {
		if !o.o.Fixpoint {
			fmt.Fprintf(out, "warning: %s still wrote after %d rounds: no fixpoint, the plan is partial\n", o.name, o.o.Rounds)
		}
		for _, p := range o.o.Problems {
			fmt.Fprintf(out, "warning: %s: %s\n", o.name, p)
		}
	}
}

// shownPerRule is how many of a rule's changes a plan lists before it
// counts the rest: scaling a service from 100,000 instances to 3 deletes
// 99,997 placements, a listing no one reads on a terminal.
const shownPerRule = 10

// keyListing is how a plan's changes are listed: every one (--all), or
// each rule's first shownPerRule and the rest counted by the key templates
// of schema, the one the plan's facts are typed by (plugin types too).
type keyListing struct {
	all    bool
	schema *facts.Schema
}

// printKeyDiffs lists a plan's changes by rule, as l says; was names the
// value compared with.
func printKeyDiffs(out io.Writer, d whatif.Diff, was string, l keyListing) {
	bw := bufio.NewWriter(out)
	defer bw.Flush()
	for i := 0; i < len(d.Changes); {
		rule := d.Changes[i].Rule
		j := i
		for j < len(d.Changes) && d.Changes[j].Rule == rule {
			j++
		}
		cs := d.Changes[i:j]
		i = j
		fmt.Fprintf(bw, "\n%s\n", rule)
		shown := cs
		if !l.all && len(cs) > shownPerRule {
			shown = cs[:shownPerRule]
		}
		for _, c := range shown {
			switch c.Op {
			case whatif.Put:
				fmt.Fprintf(bw, "  + %s = %s\n", c.Key, c.Value)
			case whatif.Change:
				fmt.Fprintf(bw, "  ~ %s = %s  (%s: %s)\n", c.Key, c.Value, was, c.Was)
			default:
				fmt.Fprintf(bw, "  - %s  (%s: %s)\n", c.Key, was, c.Was)
			}
		}
		if rest := cs[len(shown):]; len(rest) > 0 {
			fmt.Fprintf(bw, "  … and %s more (--all lists them): %s\n", count(len(rest)), kindsOf(rest, l.schema))
		}
	}
}

var opMarks = map[string]string{whatif.Put: "+", whatif.Change: "~", whatif.Delete: "-"}

// maxKinds is how many kinds of key a rule's count names; the rest are
// summed: a rule writing keys of many kinds is still one line.
const maxKinds = 8

// kindsOf counts changes by operation and kind of key, the most first:
// "99,990 × - placement/instance/{instance-id}, 3 × ~ observed/service/{name}/...".
func kindsOf(cs []whatif.KeyDiff, schema *facts.Schema) string {
	type kind struct{ op, shape string }
	n := map[kind]int{}
	var order []kind
	for _, c := range cs {
		k := kind{c.Op, keyShape(schema, c.Key)}
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	slices.SortStableFunc(order, func(a, b kind) int { return n[b] - n[a] })
	var parts []string
	for i, k := range order {
		if i == maxKinds {
			others := 0
			for _, k := range order[i:] {
				others += n[k]
			}
			parts = append(parts, fmt.Sprintf("%s of %d other kinds", count(others), len(order)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s × %s %s", count(n[k]), opMarks[k.op], k.shape))
	}
	return strings.Join(parts, ", ")
}

// keyShape is the template of key's fact type in schema, or for a key of
// no type, its parent's path: one kind for its siblings, not one each.
func keyShape(schema *facts.Schema, key string) string {
	if t, err := schema.KeyType(key); err == nil {
		return t.Template
	}
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i] + "/*"
	}
	return key
}

// count renders n with thousands separated: 99,990.
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
