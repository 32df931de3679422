package ruletest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
)

// FuzzParseFile: a test file of any content parses to tests or
// diagnostics, never a panic.
func FuzzParseFile(f *testing.F) {
	seeds, _ := filepath.Glob("../testdata/*/*_test.hcl")
	more, _ := filepath.Glob("../../testdata/*/*_test.hcl")
	for _, p := range append(seeds, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`test "x" { facts = { "a/b" = 1 } expect { writes = { "*" = [1, 2] } } }`))
	// Nesting past the parser's stack (testdata holds a short one).
	f.Add([]byte(`test "x" { facts = { "a/b" = ` + strings.Repeat("{ c = ", 100000) + ` } }`))
	f.Fuzz(func(t *testing.T, src []byte) {
		tests, _, diags := ParseFile("f_test.hcl", src, facts.Default)
		if diags.HasErrors() {
			return
		}
		for _, tc := range tests {
			if len(tc.Steps) == 0 {
				t.Fatalf("test %q has no steps", tc.Name)
			}
		}
	})
}
