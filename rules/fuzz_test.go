package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the rule-file loader: it must return a
// rule set or diagnostics, never panic, and a rule set only without errors.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*/*.hcl")
	more, _ := filepath.Glob("../engine/eval/testdata/*/*.hcl")
	lc, _ := filepath.Glob("../engine/testdata/*/*.hcl")
	// The default policies: shared definitions, counts, relations, deletes by prefix.
	pol, _ := filepath.Glob("../policies/*.hcl")
	for _, p := range append(append(append(seeds, more...), lc...), pol...) {
		if b, err := os.ReadFile(p); err == nil && IsRuleFile(p) {
			f.Add(b)
		}
	}
	f.Add([]byte(okRule))
	// The 150 KB rule file that killed `rules check` and a watching
	// server with a stack overflow (testdata holds a short one).
	f.Add([]byte("rule \"x\" {\n  when = " + strings.Repeat("[", 150000) + "\n}\n"))
	f.Add([]byte(`rule "x" { when = "a >" }`))
	f.Add([]byte("rule \"x\" {\n  match { a = \"observed/{x}/{y}\" }\n}\n"))
	f.Add([]byte("let {\n  a = \"b + 1\"\n  b = \"a\"\n}\nconst { c = 1e400 }\nrelation \"r\" { over = [\"r\", 1] }\ncounts { over = \"r\"\n x = \"a\" }\n" + okRule))
	f.Fuzz(func(t *testing.T, src []byte) {
		rs, diags := LoadFiles(map[string][]byte{"f.hcl": src})
		if rs != nil && diags.HasErrors() {
			t.Fatalf("a rule set with errors: %s", diags.Error())
		}
		if rs == nil && !diags.HasErrors() {
			t.Fatal("no rule set and no error")
		}
		for _, d := range diags {
			if d.Subject != nil && d.Subject.Start.Byte > len(src)+1 {
				t.Fatalf("diagnostic %q points past the end: %v", d.Summary, d.Subject)
			}
		}
	})
}
