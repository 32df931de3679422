package hclcheck

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestWriteDiagnostics: the printer rule files and service files share:
// the headline, the line kept as written (tabs too, so the caret lines
// up), carets under the token or to the end of its line, every line of a
// detail indented, no snippet without a subject or without the file, and
// the line number as wide as asked.
func TestWriteDiagnostics(t *testing.T) {
	src := []byte("rule \"r\" {\n\twhen = \"n > 'x'\"\n  doc = <<EOT\nx\nEOT\n}\n")
	f, diags := hclsyntax.ParseConfig(src, "a.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	files := map[string]*hcl.File{"a.hcl": f}
	at := func(line, col, byteOff, endLine, endCol, endByte int) *hcl.Range {
		return &hcl.Range{Filename: "a.hcl", Start: hcl.Pos{Line: line, Column: col, Byte: byteOff},
			End: hcl.Pos{Line: endLine, Column: endCol, Byte: endByte}}
	}
	for _, tc := range []struct {
		name  string
		d     *hcl.Diagnostic
		width int
		want  string
	}{
		{"token after a tab", &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Bad", Detail: "First.\nSecond.",
			Subject: at(2, 14, 24, 2, 17, 27)}, 4,
			"a.hcl:2:14: error: Bad\n   2 | \twhen = \"n > 'x'\"\n     | \t            ^^^\n  First.\n  Second.\n\n"},
		{"to the end of the line", &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Long",
			Subject: at(3, 3, 31, 5, 4, 48)}, 5,
			"a.hcl:3:3: warning: Long\n    3 |   doc = <<EOT\n      |   ^^^^^^^^^^^\n\n"},
		{"no subject", &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Nothing", Detail: "Why."}, 4,
			"error: Nothing\n  Why.\n\n"},
		{"file not given", &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Elsewhere",
			Subject: &hcl.Range{Filename: "b.hcl", Start: hcl.Pos{Line: 1, Column: 1}, End: hcl.Pos{Line: 1, Column: 2, Byte: 1}}}, 4,
			"b.hcl:1:1: error: Elsewhere\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteDiagnostics(&b, files, hcl.Diagnostics{tc.d}, tc.width); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", strings.ReplaceAll(b.String(), "\t", "→"), strings.ReplaceAll(tc.want, "\t", "→"))
			}
		})
	}
}
