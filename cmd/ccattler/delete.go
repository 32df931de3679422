package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newDeleteCmd) }

// deleteKinds maps what users type to what is deleted.
var deleteKinds = map[string]spec.Kind{
	"service": spec.KindService, "services": spec.KindService, "svc": spec.KindService,
	"volume": spec.KindVolume, "volumes": spec.KindVolume, "vol": spec.KindVolume,
}

func newDeleteCmd() *cobra.Command {
	var files []string
	var dryRun, wait, ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "delete service|volume NAME [NAME...] | delete -f FILE|DIR [-f ...]",
		Short: "Remove services' and volumes' desired facts",
		Long: `Remove every desired/service/NAME/... fact and the user's intent
intent/user/service/NAME/instances (or every desired/volume/NAME/... fact) of
the objects named, or of every service and volume the files declare (-f), in
one transaction. The controllers then stop what no longer is desired.

A name with nothing to delete (unless --ignore-not-found), or a volume that a
service not deleted with it still names, is an error (exit 1) and nothing is
deleted: a volume goes with the service using it when both are named, or
both are in the files.

--wait then waits until every deleted service has no instance pending or
running and no endpoint left, printing progress on stderr; it exits 1 naming
those still running after --timeout (default with --wait: 5m).`,
		Example: `  ccattler delete service web
  ccattler delete service web api --wait     # until their instances stopped
  ccattler delete -f examples/web.hcl        # what the file declares
  ccattler delete volume data --dry-run`,
		RunE: func(cmd *cobra.Command, args []string) error {
			refs, err := deleteRefs(cmd, args, files)
			if err != nil {
				return err
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := spec.DeleteAll(cmd.Context(), s, refs, spec.Options{DryRun: dryRun, IgnoreNotFound: ignoreNotFound})
			var refused *spec.RefusedError
			if errors.As(err, &refused) {
				_ = spec.WriteDiagnostics(cmd.ErrOrStderr(), nil, refused.Diags)
				return exitError{code: 1, err: fmt.Errorf("delete of %s refused; nothing was deleted", refsText(refs))}
			}
			if errors.Is(err, spec.ErrNotFound) && len(refs) > 1 {
				return exitError{code: 1, err: fmt.Errorf("%w; nothing was deleted", err)}
			}
			if err != nil {
				return err
			}
			if err := printResult(cmd.OutOrStdout(), res, dryRun); err != nil || !wait || dryRun {
				return err
			}
			var services []string
			for _, r := range refs {
				if r.Kind == spec.KindService {
					services = append(services, r.Name)
				}
			}
			ctx, within := waitBounds(cmd)
			return waitGone(ctx, s, services, within, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "delete every service and volume declared in a file, or a directory of *.hcl files (repeatable)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be deleted, delete nothing")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "pass over the names that have nothing to delete instead of failing")
	cmd.Flags().BoolVar(&wait, "wait", false, "after deleting, wait until the services' instances have stopped and their endpoints are gone (progress on stderr; bounded by --timeout, default 5m)")
	return cmd
}

// deleteRefs is what a delete names: KIND NAME... or the objects of -f's
// files, not both.
func deleteRefs(cmd *cobra.Command, args, files []string) ([]spec.Ref, error) {
	if len(files) > 0 {
		if len(args) > 0 {
			return nil, usageError("delete: give KIND NAME... or -f FILE, not both")
		}
		doc, _, err := decodeFiles(cmd, files) // what a deleted service would run does not matter: no warnings
		if err != nil {
			return nil, err
		}
		var refs []spec.Ref
		for _, o := range doc.Objects {
			refs = append(refs, spec.Ref{Kind: o.Kind, Name: o.Name})
		}
		if len(refs) == 0 {
			return nil, exitError{code: 1, err: fmt.Errorf("%s declare no service or volume; nothing was deleted", strings.Join(files, ", "))}
		}
		return refs, nil
	}
	if len(args) < 2 {
		return nil, usageError("delete: expected KIND NAME..., such as `ccattler delete service web`, or -f FILE; got %d arguments", len(args))
	}
	kind, ok := deleteKinds[args[0]]
	if !ok {
		return nil, usageError("delete: unknown kind %q: expected service or volume", args[0])
	}
	var refs []spec.Ref
	for _, name := range args[1:] {
		if err := facts.CheckSegment("name", name); err != nil {
			return nil, usageError("delete %s: %v", args[0], err)
		}
		if r := (spec.Ref{Kind: kind, Name: name}); !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	return refs, nil
}

func refsText(refs []spec.Ref) string {
	var parts []string
	for _, r := range refs {
		parts = append(parts, r.String())
	}
	return strings.Join(parts, ", ")
}

// remaining is what is left running of a deleted service, read at one
// revision.
type remaining struct {
	Service   string
	Live      int // instances pending or running
	Endpoints int
}

func (r remaining) gone() bool { return r.Live == 0 && r.Endpoints == 0 }

func (r remaining) String() string {
	return fmt.Sprintf("%s: %d %s pending or running, %d %s", r.Service,
		r.Live, plural(r.Live, "instance", "instances"), r.Endpoints, plural(r.Endpoints, "endpoint", "endpoints"))
}

// readRemaining reads, at one revision, what is left of each service.
func readRemaining(ctx context.Context, s *facts.Store, services []string) ([]remaining, error) {
	insts, rev, err := s.List(ctx, "observed/instance/", 0)
	if err != nil {
		return nil, fmt.Errorf("read observed/instance/: %w", err)
	}
	eps, _, err := s.List(ctx, "endpoint/service/", rev)
	if err != nil {
		return nil, fmt.Errorf("read endpoint/service/: %w", err)
	}
	service, state := map[string]string{}, map[string]string{}
	for _, f := range insts {
		if id, ok := instanceFact(f.Key, "service"); ok {
			service[id], _ = facts.StringValue(f.Value)
		} else if id, ok := instanceFact(f.Key, "state"); ok {
			state[id], _ = facts.StringValue(f.Value)
		}
	}
	out := make([]remaining, len(services))
	at := map[string]int{}
	for i, svc := range services {
		out[i].Service, at[svc] = svc, i
	}
	for id, svc := range service {
		if i, ok := at[svc]; ok && (state[id] == "pending" || state[id] == "running") {
			out[i].Live++
		}
	}
	for _, f := range eps {
		if svc, _, ok := strings.Cut(strings.TrimPrefix(f.Key, "endpoint/service/"), "/"); ok {
			if i, ok := at[svc]; ok {
				out[i].Endpoints++
			}
		}
	}
	return out, nil
}

// progressLines is --wait's progress: a line per service, or for more than
// progressEach one line of totals naming a few still running.
func progressLines(rs []remaining) []string {
	if len(rs) <= progressEach {
		lines := make([]string, len(rs))
		for i, r := range rs {
			lines[i] = r.String()
		}
		return lines
	}
	total := remaining{Service: fmt.Sprintf("%d services", len(rs))}
	var left []string
	for _, r := range rs {
		total.Live += r.Live
		total.Endpoints += r.Endpoints
		if !r.gone() {
			left = append(left, r.Service)
		}
	}
	line := total.String()
	if len(left) > 0 {
		line += fmt.Sprintf(" (%d still running: %s)", len(left), strings.Join(left[:min(len(left), 3)], ", "))
		if len(left) > 3 {
			line = strings.TrimSuffix(line, ")") + ", …)"
		}
	}
	return []string{line}
}

// waitGone polls until nothing of services runs, printing each change of
// their progress on progress. It fails naming the services still running
// at the deadline.
func waitGone(ctx context.Context, s *facts.Store, services []string, within time.Duration, progress io.Writer) error {
	if len(services) == 0 {
		return nil
	}
	return poll(ctx, within, progress, func(ctx context.Context) (lines, left []string, err error) {
		rs, err := readRemaining(ctx, s, services)
		for _, r := range rs {
			if !r.gone() {
				left = append(left, r.String())
			}
		}
		return progressLines(rs), left, err
	}, doneLine("stopped", services), "what is left", "not stopped", "ccattler get instances shows them")
}
