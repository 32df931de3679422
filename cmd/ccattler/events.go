package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newEventsCmd) }

func newEventsCmd() *cobra.Command {
	var (
		flt    audit.Filter
		since  string
		follow bool
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show the firing records: every write and the rule that made it",
		Long: `Show the records under event/, newest last. Each record names the rule (or
the apply, or the agent) that wrote, the rule-set version, the bindings, the
facts read with their revisions, and the writes.

--rule naming no rule the records or the default policies know is a usage
mistake (exit 2) that lists the known names; with --follow it is a warning,
since a rule of a server's --policies DIR is known only once it fired.`,
		Example: `  ccattler events
  ccattler events --limit 20
  ccattler events --rule schedule --since 10m
  ccattler events --key endpoint/service/web/ --follow
  ccattler events -o json | jq .`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 0 {
				return usageError("--limit %d: expected 0 (every record) or more", limit)
			}
			if since != "" {
				t, err := parseSince(since)
				if err != nil {
					return usageError("--since %q: %v", since, err)
				}
				flt.Since = t
			}
			ctx, stop := stopOnInterrupt(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			s, err := g.dial(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			evs, rev, bad, err := records(ctx, s, flt, limit)
			if err != nil {
				return err
			}
			if len(evs) == 0 && flt.Rule != "" {
				// Filtered by the rule alone, records looked at every record
				// for it: checkRuleName need not look again.
				searched := flt.Since.IsZero() && flt.KeyPrefix == ""
				if err := checkRuleName(ctx, s, flt.Rule, searched, follow, cmd.ErrOrStderr()); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			for _, ev := range evs {
				if err := printEvent(out, ev); err != nil {
					return err
				}
			}
			if bad > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %d records could not be decoded and were skipped\n", bad)
			}
			if !follow {
				return nil
			}
			err = audit.Follow(ctx, s, flt, rev, func(ev audit.Event) { _ = printEvent(out, ev) })
			if ctx.Err() != nil {
				return nil // Ctrl-C ends a follow normally
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&flt.Rule, "rule", "", "only records of this rule")
	f.StringVar(&flt.KeyPrefix, "key", "", "only records that read or wrote a key with this prefix")
	f.StringVar(&since, "since", "", "only records this recent: a duration (10m) or an RFC 3339 time")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new records as they are committed")
	f.IntVarP(&limit, "limit", "n", 0, "only the newest N records (0: all); with --follow, the newest N then every new one")
	return cmd
}

// records returns the records flt passes, oldest first: the newest limit
// of them (0: every one), read newest first until there are that many, so
// that the last 20 of 100,000 records do not load them all.
func records(ctx context.Context, s *facts.Store, flt audit.Filter, limit int) ([]audit.Event, int64, int, error) {
	if limit == 0 {
		return audit.List(ctx, s, flt)
	}
	var evs []audit.Event
	rev, _, bad, err := audit.Newest(ctx, s, audit.Query{Since: flt.Since, Raw: flt.Raw()}, func(e audit.Event) bool {
		if flt.Match(e) {
			evs = append(evs, e)
		}
		return len(evs) < limit
	})
	slices.Reverse(evs)
	return evs, rev, bad, err
}

// parseSince accepts a duration back from now or an absolute time.
func parseSince(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("expected a duration such as 10m or a time such as 2026-11-29T18:00:00Z")
	}
	return t, nil
}

func printEvent(out io.Writer, ev audit.Event) error {
	if g.output == "json" {
		return printJSONLine(out, ev)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  rev %d  %s", ev.ID, ev.Rev, ev.Rule)
	if ev.Kind != "" {
		fmt.Fprintf(&b, " (%s)", ev.Kind)
	}
	if ev.Version != "" {
		fmt.Fprintf(&b, "  rules %s", ev.Version)
	}
	if len(ev.Bindings) > 0 {
		fmt.Fprintf(&b, "  {%s}", audit.BindingText(ev.Bindings))
	}
	if ev.Message != "" {
		fmt.Fprintf(&b, "  %s", ev.Message)
	}
	b.WriteByte('\n')
	for _, w := range ev.Writes {
		if w.Deleted {
			fmt.Fprintf(&b, "    - %s\n", w.Key)
		} else {
			fmt.Fprintf(&b, "    + %s = %s\n", w.Key, w.Value)
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}
