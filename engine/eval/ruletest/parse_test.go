package ruletest

import (
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
)

// summaries = true asks a test to run the summaries; anything but a bool
// is refused at the value, rather than read as false.
func TestParseSummaries(t *testing.T) {
	for _, c := range []struct {
		src  string
		want bool
		err  string // a diagnostic's position, "" for none
	}{
		{`test "x" { }`, false, ""},
		{`test "x" { summaries = true }`, true, ""},
		{`test "x" { summaries = false }`, false, ""},
		{`test "x" { summaries = "yes" }`, false, "f_test.hcl:1,24-29"},
	} {
		tests, _, diags := ParseFile("f_test.hcl", []byte(c.src), facts.Default)
		if c.err != "" {
			if !diags.HasErrors() || !strings.Contains(diags.Error(), c.err) || !strings.Contains(diags.Error(), "summaries is true") {
				t.Errorf("%s: diagnostics %v, want one at %s", c.src, diags, c.err)
			}
			continue
		}
		if diags.HasErrors() || len(tests) != 1 || tests[0].Summaries != c.want {
			t.Errorf("%s: %v %v, want Summaries %v", c.src, tests, diags, c.want)
		}
	}
}
