package eval_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2"
)

// TestRuleTests runs every testdata/<case>/ as rule tests written as data.
func TestRuleTests(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		t.Run(filepath.Base(dir), func(t *testing.T) { runDir(t, dir) })
	}
}

func runDir(t *testing.T, dir string) {
	t.Helper()
	rs, diags := rules.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("load %s:\n%s", dir, diagText(rs, diags))
	}
	paths, err := ruletest.Find(dir)
	if err != nil || len(paths) == 0 {
		t.Fatalf("no tests in %s (%v)", dir, err)
	}
	tests, _, diags := ruletest.Parse(paths, rs.Schema)
	if diags.HasErrors() {
		t.Fatalf("parse tests: %s", diags.Error())
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			res := ruletest.Run(rs, tc)
			if !res.Passed() {
				t.Errorf("\n%s", strings.Join(res.Failures, "\n"))
			}
		})
	}
}

func diagText(rs *rules.RuleSet, d hcl.Diagnostics) string {
	var b strings.Builder
	for _, x := range d {
		b.WriteString(x.Error())
		b.WriteByte('\n')
	}
	return b.String()
}
