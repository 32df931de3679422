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
	return withRecordedNames(ctx, s, defaultRuleNames(s.Schema))
}

// withRecordedNames is names and every writer the records name, sorted,
// each once.
func withRecordedNames(ctx context.Context, s *facts.Store, names []string) ([]string, error) {
	recorded, err := audit.RuleNames(ctx, s)
	if err != nil {
		return nil, err
	}
	all := slices.Concat(names, recorded)
	slices.Sort(all)
	return slices.Compact(all), nil
}

// defaultRuleNames are the rules of the default policies.
func defaultRuleNames(schema *facts.Schema) []string {
	var names []string
	if rs, _, diags := rules.LoadFilesWithSources(builtinPolicies(), rules.WithSchema(schema)); !diags.HasErrors() {
		for _, r := range rs.Rules {
			names = append(names, r.Name)
		}
	}
	return names
}

// checkRuleName refuses a --rule that no record and no default policy
// names: a typo would otherwise print nothing and exit 0. With --follow
// the rule may be one of a server's own policies that has not fired yet:
// a warning then. A default policy's rule is known without a read; any
// other is looked for newest first until a record names it — unless the
// caller has looked at every record for it already and found none
// (searched) — and only a name no record has reads every record (to list
// the known ones): at 100,000 records, reading and decoding every one
// took seconds.
func checkRuleName(ctx context.Context, s *facts.Store, rule string, searched, follow bool, stderr io.Writer) error {
	defaults := defaultRuleNames(s.Schema)
	if slices.Contains(defaults, rule) {
		return nil
	}
	if !searched {
		found := false
		if _, _, _, err := audit.Newest(ctx, s, audit.Query{Raw: audit.Filter{Rule: rule}.Raw()}, func(e audit.Event) bool {
			found = e.Rule == rule
			return !found
		}); err != nil || found {
			return err
		}
	}
	known, err := withRecordedNames(ctx, s, defaults)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("--rule %q: no record and no default policy names this rule; known: %s", rule, strings.Join(known, ", "))
	if follow {
		fmt.Fprintln(stderr, "warning:", msg)
		return nil
	}
	return usageError("%s", msg)
}
