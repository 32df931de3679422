package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Shell completion from the cluster: `ccattler get services <TAB>` offers
// the services there are. A completion runs on every TAB, so it gives the
// cluster little time (completionDeadline, a dial of at most as long) and
// offers nothing rather than hanging the shell when etcd is away.
const completionDeadline = 2 * time.Second

// completionNames lists the names of a kind ("services", "instances",
// "nodes", "volumes") starting with prefix, or nothing if the cluster does
// not answer in time.
func completionNames(cmd *cobra.Command, kind, prefix string) []string {
	if cmd.Flags().Changed("etcd") {
		g.etcdGiven = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionDeadline)
	defer cancel()
	saved := g.dialTimeout
	g.dialTimeout = min(g.dialTimeout, completionDeadline/2)
	defer func() { g.dialTimeout = saved }()
	s, err := g.dial(ctx)
	if err != nil {
		return nil
	}
	defer s.Close()
	var names []string
	if kind == "rules" {
		names, _ = knownRuleNames(ctx, s)
	} else {
		w, err := loadTrees(ctx, s, nameTrees(kind))
		if err != nil {
			return nil
		}
		for _, it := range w.items(kind, time.Now()) {
			names = append(names, it.id)
		}
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// completeKindThenNames completes `CMD KIND NAME...`: the kinds first,
// then the names of the kind typed (kinds maps what users type to a kind
// of get's), many names or just one.
func completeKindThenNames(kinds []string, canonical func(string) string, many bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return kinds, cobra.ShellCompDirectiveNoFileComp
		}
		kind := canonical(args[0])
		if kind == "" || !many && len(args) > 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range completionNames(cmd, kind, toComplete) {
			if !slices.Contains(args[1:], n) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNames completes flag values or arguments with one kind's names.
func completeNames(kind string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completionNames(cmd, kind, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// registerCompletions gives the commands that name cluster objects their
// completions; it finds them by path, so a command file need not know.
func registerCompletions(root *cobra.Command) {
	find := func(path ...string) *cobra.Command {
		c, rest, err := root.Find(path)
		if err != nil || len(rest) > 0 || c == root {
			return nil
		}
		return c
	}
	getKind := func(s string) string { return getKinds[s] }
	if c := find("get"); c != nil {
		c.ValidArgsFunction = completeKindThenNames([]string{"services", "instances", "nodes", "endpoints", "volumes"}, func(s string) string {
			if k := getKind(s); k == "endpoints" {
				return "services" // endpoints are named by their service
			} else {
				return k
			}
		}, true)
		_ = c.RegisterFlagCompletionFunc("service", completeNames("services"))
		_ = c.RegisterFlagCompletionFunc("node", completeNames("nodes"))
		_ = c.RegisterFlagCompletionFunc("state", func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			var states []string
			if len(args) > 0 {
				states = getFilters[getKind(args[0])].states
			}
			return states, cobra.ShellCompDirectiveNoFileComp
		})
	}
	if c := find("describe"); c != nil {
		c.ValidArgsFunction = completeKindThenNames([]string{"service", "instance", "node"}, func(s string) string {
			return map[string]string{"service": "services", "instance": "instances", "node": "nodes"}[describeKinds[s]]
		}, false)
	}
	if c := find("delete"); c != nil {
		c.ValidArgsFunction = completeKindThenNames([]string{"service", "volume"}, func(s string) string {
			if k := getKind(s); k == "services" || k == "volumes" {
				return k
			}
			return ""
		}, false)
	}
	if c := find("why-not"); c != nil {
		c.ValidArgsFunction = completeKindThenNames([]string{"instance"}, func(s string) string {
			if s == "instance" {
				return "instances"
			}
			return ""
		}, false)
	}
	if c := find("logs"); c != nil {
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completionNames(cmd, "instances", toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	if c := find("events"); c != nil {
		_ = c.RegisterFlagCompletionFunc("rule", completeNames("rules"))
	}
}
