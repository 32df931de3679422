package rules

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
)

// A rule file that nests past any parser's stack, in HCL or in the CEL of
// a string, is refused with a diagnostic of a readable size, never a crash.
func TestLoadHostileFiles(t *testing.T) {
	head := "rule \"x\" {\n  doc       = \"d\"\n  principal = \"network\"\n  match {\n    s = \"observed/instance/{id}/state\"\n  }\n  when = "
	tail := "\n  derive \"endpoint/service/{id}/{id}\" {\n    value = \"{}\"\n  }\n}\n"
	cases := []struct {
		name, src, want string
	}{
		{"150 KB of nested HCL brackets", head + strings.Repeat("[", 150000) + "\n}\n", "f.hcl:7:109: error: File nests deeper than 100 levels (MaxNestingDepth)"},
		{"a file over MaxFileBytes", head + `"true"` + tail + "# " + strings.Repeat("x", facts.MaxFileBytes) + "\n", "File larger than 262144 bytes (MaxFileBytes)"},
		{"150 KB of nested CEL parentheses", head + `"` + strings.Repeat("(", 75000) + "true" + strings.Repeat(")", 75000) + `"` + tail, "f.hcl:7:"},
		{"a 144 KB CEL chain", head + `"true` + strings.Repeat(" && true", 18000) + `"` + tail, "f.hcl:7:"},
		{"150 KB of CEL negations", head + `"` + strings.Repeat("!", 150000) + `true"` + tail, "f.hcl:7:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs, files, diags := LoadFilesWithSources(map[string][]byte{"f.hcl": []byte(tc.src)})
			if rs != nil || !diags.HasErrors() {
				t.Fatal("accepted")
			}
			var out bytes.Buffer
			if err := WriteDiagnostics(&out, files, diags); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("diagnostics lack %q:\n%.2000s", tc.want, out.String())
			}
			if out.Len() > 3000 {
				t.Errorf("the diagnostics are %d bytes: they repeat the file:\n%.2000s", out.Len(), out.String())
			}
		})
	}
}
