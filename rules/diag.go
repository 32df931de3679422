package rules

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts/hclcheck"
	"github.com/hashicorp/hcl/v2"
)

// WriteDiagnostics prints diagnostics as
//
//	file:line:col: Summary
//	   7 |   when = "n > 'x'"
//	     |             ^
//	  Detail.
//
// with a caret under the exact token (files: the parsed sources, as
// LoadWithFiles returns them; a diagnostic whose file is missing is printed
// without a snippet).
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	var b bytes.Buffer
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		if d.Subject == nil {
			fmt.Fprintf(&b, "%s: %s\n", sev, d.Summary)
		} else {
			s := d.Subject
			fmt.Fprintf(&b, "%s:%d:%d: %s: %s\n", s.Filename, s.Start.Line, s.Start.Column, sev, d.Summary)
			if f, ok := files[s.Filename]; ok && f != nil {
				snippet(&b, f.Bytes, *s)
			}
		}
		if d.Detail != "" {
			for _, line := range strings.Split(d.Detail, "\n") {
				fmt.Fprintf(&b, "  %s\n", line)
			}
		}
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// snippetWidth is the most characters of a source line a snippet shows.
const snippetWidth = 160

// snippet writes the subject's first line with carets under the subject.
func snippet(b *bytes.Buffer, src []byte, r hcl.Range) {
	lines := bytes.Split(src, []byte("\n"))
	if r.Start.Line < 1 || r.Start.Line > len(lines) {
		return
	}
	line := strings.ReplaceAll(string(lines[r.Start.Line-1]), "\t", " ")
	width := 1
	if r.End.Line == r.Start.Line && r.End.Column > r.Start.Column {
		width = r.End.Column - r.Start.Column
	} else if r.End.Line > r.Start.Line {
		width = max(1, utf8.RuneCountInString(line)-r.Start.Column+1)
	}
	// A hostile file's line may be 150 KB or hold characters that reorder
	// the terminal's text: show a clean window of it.
	line, col := hclcheck.Excerpt(line, r.Start.Column, snippetWidth)
	width = max(1, min(width, utf8.RuneCountInString(line)-col+1))
	num := fmt.Sprintf("%4d", r.Start.Line)
	fmt.Fprintf(b, "%s | %s\n", num, line)
	fmt.Fprintf(b, "%s | %s%s\n", strings.Repeat(" ", len(num)), strings.Repeat(" ", max(0, col-1)), strings.Repeat("^", width))
}
