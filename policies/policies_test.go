package policies_test

import (
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/policies"
	"github.com/ccattler/ccattler/rules"
)

// TestDefaultPolicies loads the embedded rule set, as the server does, and
// runs the rule tests of testdata/ against it.
func TestDefaultPolicies(t *testing.T) {
	rs := loadDefault(t)
	for _, r := range rs.Rules {
		if strings.TrimSpace(r.Doc) == "" {
			t.Errorf("rule %s has no doc", r.Name)
		}
	}
	paths, err := ruletest.Find(".")
	if err != nil || len(paths) < 4 {
		t.Fatalf("rule tests under testdata/: %v %v", paths, err)
	}
	tests, _, diags := ruletest.Parse(paths, rs.Schema)
	if diags.HasErrors() {
		t.Fatalf("parse tests: %s", diags.Error())
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			if res := ruletest.Run(rs, tc); !res.Passed() {
				t.Errorf("\n%s", strings.Join(res.Failures, "\n"))
			}
		})
	}
}

// loadDefault loads the embedded rule set as the server does.
func loadDefault(tb testing.TB) *rules.RuleSet {
	tb.Helper()
	files := policies.Sources()
	if len(files) == 0 {
		tb.Fatal("no policies are embedded")
	}
	rs, diags := rules.LoadFiles(files)
	if diags.HasErrors() {
		tb.Fatalf("the default policies do not load:\n%s", diags.Error())
	}
	return rs
}

// TestDefaultPoliciesRunUntracked: every expression of the default policies
// is cheap enough, by CEL's estimate with values up to rules.FastSize, to be
// evaluated without cost tracking (a tenth of a scheduling round's time
// when it was on). An expression that loses it still works, but slower:
// this test says which.
func TestDefaultPoliciesRunUntracked(t *testing.T) {
	rs := loadDefault(t)
	n := 0
	check := func(r *rules.Rule, what string, e *rules.Expr) {
		if e == nil {
			return
		}
		n++
		if e.Fast == nil {
			t.Errorf("rule %s, %s %q: its cost is not bounded for values up to %d bytes; it is evaluated with cost tracking", r.Name, what, e.Src, rules.FastSize)
		}
	}
	var scope func(r *rules.Rule, sc *rules.Scope)
	scope = func(r *rules.Rule, sc *rules.Scope) {
		for _, ag := range sc.Aggregates {
			check(r, "aggregate "+ag.Name, ag.Of)
			check(r, "aggregate "+ag.Name+" where", ag.Where)
			scope(r, ag.Body)
		}
		for _, l := range sc.Lets {
			check(r, "let "+l.Name, l.Expr)
		}
	}
	for _, r := range rs.Rules {
		scope(r, r.Body)
		check(r, "when", r.When)
		if ch := r.Choose; ch != nil {
			scope(r, ch.Body)
			for _, f := range ch.Filters {
				check(r, "filter "+f.Name, f.Expr)
			}
			check(r, "score", ch.Score)
		}
		if r.Fresh != nil {
			check(r, "fresh count", r.Fresh.Count)
		}
		for _, h := range r.Heads {
			check(r, "head "+h.Template, h.Value)
		}
	}
	if n < 100 {
		t.Errorf("%d expressions checked: the walk misses some", n)
	}
}
