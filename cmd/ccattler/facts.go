package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newFactsCmd) }

func newFactsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "facts",
		Short: "Read the raw facts: get, watch, schema",
		Long: `Raw access to the fact store. Keys are relative to the root (--root,
default /ccattler/), e.g. desired/service/web/image.`,
	}
	cmd.AddCommand(newFactsGetCmd(), newFactsWatchCmd(), newFactsSchemaCmd())
	return cmd
}

// factJSON is a fact as -o json prints it.
type factJSON struct {
	Key            string `json:"key"`
	Value          any    `json:"value"`
	ModRevision    int64  `json:"mod_revision"`
	CreateRevision int64  `json:"create_revision"`
}

func newFactsGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "get [PREFIX]",
		Short: "Print every fact whose key starts with PREFIX",
		Long: `Print every fact whose key starts with PREFIX (all facts when PREFIX is
empty), one "key = value" line each, in key order, as of one revision;
none says so on stderr. PREFIX is relative to --root (desired/, not
/ccattler/desired/). -o json adds each fact's mod and create revisions.`,
		Example: `  ccattler facts get desired/
  ccattler facts get observed/instance/a8f31/
  ccattler facts get desired/service/web -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix, err := factPrefix(args)
			if err != nil {
				return err
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			fs, rev, err := s.List(cmd.Context(), prefix, 0)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output == "json" {
				res := struct {
					Revision int64      `json:"revision"`
					Facts    []factJSON `json:"facts"`
				}{Revision: rev, Facts: []factJSON{}}
				for _, f := range fs {
					res.Facts = append(res.Facts, factJSON{Key: f.Key, Value: jsonValue(f.Value),
						ModRevision: f.ModRevision, CreateRevision: f.CreateRevision})
				}
				return printJSON(out, res)
			}
			for _, f := range fs {
				fmt.Fprintf(out, "%s = %s\n", f.Key, f.Value)
			}
			if len(fs) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "no facts under %q at revision %d\n", prefix, rev)
			}
			return nil
		},
	}
}

// factPrefix is the PREFIX argument of facts get and facts watch: a key
// relative to --root. An absolute one (an etcd key, /ccattler/desired/)
// matches no fact; it is a usage mistake that says what to give instead.
func factPrefix(args []string) (string, error) {
	if len(args) == 0 {
		return "", nil
	}
	p := args[0]
	if rel, ok := strings.CutPrefix(p, g.root); ok && strings.HasPrefix(p, "/") {
		return "", usageError("PREFIX %q: keys are relative to --root %s; give %q", p, g.root, rel)
	}
	if strings.HasPrefix(p, "/") {
		return "", usageError("PREFIX %q: keys are relative to --root %s and never begin with /", p, g.root)
	}
	return p, nil
}

func newFactsWatchCmd() *cobra.Command {
	var fromRev int64
	cmd := &cobra.Command{
		Use:   "watch [PREFIX]",
		Short: "Print every change under PREFIX as it happens, until Ctrl-C",
		Long: `Print one line per change of a fact whose key starts with PREFIX:

  REV put KEY = VALUE
  REV delete KEY

It starts after the current revision, or at --rev to replay history etcd
still keeps. -o json prints one JSON object per line.`,
		Example: `  ccattler facts watch observed/
  ccattler facts watch desired/service/web --rev 1`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix, err := factPrefix(args)
			if err != nil {
				return err
			}
			ctx, stop := stopOnInterrupt(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			s, err := g.dial(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			if fromRev == 0 {
				_, _, rev, err := s.First(ctx, prefix)
				if err != nil {
					return fmt.Errorf("read the current revision: %w", err)
				}
				fromRev = rev + 1
			}
			out := cmd.OutOrStdout()
			for resp := range s.WatchChanges(ctx, prefix, fromRev) {
				if err := resp.Err; err != nil {
					if resp.CompactRevision > 0 {
						return fmt.Errorf("watch %s from revision %d: etcd's history before revision %d was compacted (the engine leader compacts every --compact-every, keeping one interval): give --rev %d or later",
							prefix, fromRev, resp.CompactRevision, resp.CompactRevision)
					}
					return fmt.Errorf("watch %s from revision %d: %w", prefix, fromRev, err)
				}
				for _, c := range resp.Changes {
					key, rev, del := c.Key, c.ModRevision, c.Deleted
					if g.output == "json" {
						op := "put"
						if del {
							op = "delete"
						}
						line := struct {
							Revision int64  `json:"revision"`
							Op       string `json:"op"`
							Key      string `json:"key"`
							Value    any    `json:"value,omitempty"`
						}{rev, op, key, nil}
						if !del {
							line.Value = jsonValue(c.Value)
						}
						if err := printJSONLine(out, line); err != nil {
							return err
						}
						continue
					}
					if del {
						fmt.Fprintf(out, "%d delete %s\n", rev, key)
					} else {
						fmt.Fprintf(out, "%d put %s = %s\n", rev, key, c.Value)
					}
				}
			}
			if ctx.Err() != nil {
				return nil // Ctrl-C: a normal end
			}
			return errors.New("watch: the connection to etcd was lost")
		},
	}
	cmd.Flags().Int64Var(&fromRev, "rev", 0, "first revision to print (default: changes from now on)")
	return cmd
}

func newFactsSchemaCmd() *cobra.Command {
	var plugins bool
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "List every key form with its value type and meaning",
		Long: `List every key form of the schema: its template, the type of its values
and what it means. --plugins also reads the fact types plugins registered
under schema/ in etcd.`,
		Example: `  ccattler facts schema
  ccattler facts schema --plugins -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			schema := facts.Default
			if plugins {
				s, err := g.dial(cmd.Context())
				if err != nil {
					return err
				}
				defer s.Close()
				s.Schema = facts.NewSchema()
				if err := s.LoadPlugins(cmd.Context()); err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", err)
				}
				schema = s.Schema
			}
			types := schema.Types()
			out := cmd.OutOrStdout()
			if g.output == "json" {
				type typeJSON struct {
					Name    string `json:"name"`
					Builtin bool   `json:"builtin"`
					facts.Registration
				}
				res := []typeJSON{}
				for _, t := range types {
					res = append(res, typeJSON{Name: t.Name, Builtin: t.Builtin, Registration: facts.RegistrationOf(t)})
				}
				return printJSON(out, res)
			}
			tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tTYPE\tDOC")
			for _, t := range types {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Template, typeText(t.Value), t.Doc)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&plugins, "plugins", false, "include fact types registered under schema/ in etcd")
	return cmd
}

// typeText is a value type in a few characters: "enum(alive|unreachable|draining)",
// "int>=0", "object{ip:ip,port:int}", "string(name)".
func typeText(vt facts.ValueType) string {
	s := vt.Kind.String()
	switch vt.Kind {
	case facts.KindEnum:
		return s + "(" + strings.Join(vt.Enum, "|") + ")"
	case facts.KindString:
		if vt.Format != "" {
			return s + "(" + vt.Format + ")"
		}
	case facts.KindObject:
		if len(vt.Fields) > 0 {
			var fs []string
			for n, k := range vt.Fields {
				fs = append(fs, n+":"+k.String())
			}
			sort.Strings(fs)
			return s + "{" + strings.Join(fs, ",") + "}"
		}
	}
	if vt.Min != nil {
		s += fmt.Sprintf(">=%g", *vt.Min)
	}
	if vt.Max != nil {
		s += fmt.Sprintf("<=%g", *vt.Max)
	}
	return s
}

// printJSONLine writes v as one line of JSON, for streams.
func printJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
