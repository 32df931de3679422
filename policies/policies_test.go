package policies_test

import (
	"io/fs"
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
	files := map[string][]byte{}
	names, err := fs.Glob(policies.Files, "*.hcl")
	if err != nil || len(names) == 0 {
		tb.Fatalf("embedded policies: %v %v", names, err)
	}
	for _, n := range names {
		b, _ := fs.ReadFile(policies.Files, n)
		files[n] = b
	}
	rs, diags := rules.LoadFiles(files)
	if diags.HasErrors() {
		tb.Fatalf("the default policies do not load:\n%s", diags.Error())
	}
	return rs
}
