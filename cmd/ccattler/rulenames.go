package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// knownRuleNames are the names a record's rule may have: the rules of the
// default policies, and every writer named in the records kept (the rules
// of a server started with --policies DIR once they fired, apply, delete,
// reload, the agents' reports). Sorted.
func knownRuleNames(ctx context.Context, s *facts.Store) ([]string, error) {
	evs, _, _, err := audit.List(ctx, s, audit.Filter{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range evs {
		names = append(names, e.Rule)
	}
	if rs, _, diags := rules.LoadFilesWithSources(builtinPolicies(), rules.WithSchema(s.Schema)); !diags.HasErrors() {
		for _, r := range rs.Rules {
			names = append(names, r.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// checkRuleName refuses a --rule that no record and no default policy
// names: a typo would otherwise print nothing and exit 0. With --follow
// the rule may be one of a server's own policies that has not fired yet:
// a warning then.
func checkRuleName(ctx context.Context, s *facts.Store, rule string, follow bool, stderr io.Writer) error {
	known, err := knownRuleNames(ctx, s)
	if err != nil || slices.Contains(known, rule) {
		return err
	}
	msg := fmt.Sprintf("--rule %q: no record and no default policy names this rule; known: %s", rule, strings.Join(known, ", "))
	if follow {
		fmt.Fprintln(stderr, "warning:", msg)
		return nil
	}
	return usageError("%s", msg)
}
