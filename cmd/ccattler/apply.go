package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ccattler/ccattler/facts/spec"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newApplyCmd) }

func newApplyCmd() *cobra.Command {
	var files []string
	var dryRun, wait bool
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR [-f ...]",
		Short: "Declare services and volumes from HCL files",
		Long: `Make the desired facts of the services and volumes in the files true.

Every desired/service/{name}/..., desired/volume/{name}/... and
intent/user/service/{name}/instances fact of the services and volumes the files
name is written in one transaction: new facts are put, changed ones
overwritten, and facts of attributes removed from a file (a port no longer
exposed) deleted. Services and volumes the files do not name are left alone.
Applying unchanged files writes nothing.

A file with a mistake is rejected with every problem listed as file:line:col,
and nothing is written.

--wait then waits until every applied service has converged: the effective
number of instances running the desired image, healthy, each with an
endpoint when the service exposes a port, and no older instance left. It
prints progress on stderr and exits 1 naming the services that did not
converge within --timeout (default with --wait: 5m).

The transaction holds one compare per key read and one operation per change:
the embedded etcd of ` + "`ccattler server`" + ` allows 16384 of each; an external etcd
allows what its --max-txn-ops says (128 unless raised).`,
		Example: `  ccattler apply -f examples/web.hcl
  ccattler apply -f web.hcl -f db.hcl
  ccattler apply -f services/            # every *.hcl in the directory
  ccattler apply -f web.hcl --dry-run    # show the difference, write nothing
  ccattler apply -f web.hcl --wait --timeout 2m   # until running, healthy, with endpoints`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return usageError("apply: no files: give -f FILE or -f DIR (see ccattler apply --help)")
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
			res, err := spec.Apply(cmd.Context(), s, doc, spec.Options{DryRun: dryRun})
			var refused *spec.RefusedError
			if errors.As(err, &refused) {
				_ = spec.WriteDiagnostics(cmd.ErrOrStderr(), doc.Files, refused.Diags)
				return exitError{code: 1, err: fmt.Errorf("%s refused (%d %s); nothing was written",
					strings.Join(files, ", "), len(refused.Diags), plural(len(refused.Diags), "problem", "problems"))}
			}
			if err != nil {
				return err
			}
			if err := printResult(cmd.OutOrStdout(), res, dryRun); err != nil || !wait || dryRun {
				return err
			}
			return applyWait(cmd, s, servicesOf(doc))
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a file, or a directory of *.hcl files (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the changes that would be made, write nothing")
	cmd.Flags().BoolVar(&wait, "wait", false, "after writing, wait until the services are running, healthy and have endpoints (progress on stderr; bounded by --timeout, default 5m)")
	return cmd
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// changeJSON is a change as -o json prints it.
type changeJSON struct {
	Op  string `json:"op"` // put | change | delete
	Key string `json:"key"`
	Old any    `json:"old,omitempty"`
	New any    `json:"new,omitempty"`
}

var opNames = map[spec.Op]string{spec.OpPut: "put", spec.OpChange: "change", spec.OpDelete: "delete"}

// printResult prints the changes of an apply or delete: one line each
// ("+ put", "~ change", "- delete"), then a summary line.
func printResult(w io.Writer, res spec.Result, dryRun bool) error {
	if g.output == "json" {
		out := struct {
			DryRun        bool         `json:"dry_run"`
			Written       bool         `json:"written"`
			Revision      int64        `json:"revision"`
			Changes       []changeJSON `json:"changes"`
			HistoryDenied bool         `json:"history_denied,omitempty"`
		}{DryRun: dryRun, Written: res.Written, Revision: res.Rev, Changes: []changeJSON{}, HistoryDenied: res.HistoryDenied}
		for _, c := range res.Changes {
			out.Changes = append(out.Changes, changeJSON{Op: opNames[c.Op], Key: c.Key, Old: jsonValue(c.Old), New: jsonValue(c.New)})
		}
		return printJSON(w, out)
	}
	for _, c := range res.Changes {
		fmt.Fprintln(w, c)
	}
	if res.HistoryDenied {
		fmt.Fprintln(w, "note: no history entry was written (ccattler rollback): this principal may not write desired/history/")
	}
	n := len(res.Changes)
	switch {
	case n == 0:
		fmt.Fprintln(w, "no changes")
	case dryRun:
		fmt.Fprintf(w, "dry run: %d %s, nothing written\n", n, plural(n, "change", "changes"))
	default:
		fmt.Fprintf(w, "%d %s written at revision %d\n", n, plural(n, "change", "changes"), res.Rev)
	}
	return nil
}

// jsonValue embeds a stored value in JSON output as itself when it is JSON
// (every value the project writes is), and as a string otherwise.
func jsonValue(raw []byte) any {
	if raw == nil {
		return nil
	}
	if json.Valid(raw) {
		return json.RawMessage(raw)
	}
	return string(raw)
}
