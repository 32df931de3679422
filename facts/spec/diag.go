package spec

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts/hclcheck"

	"github.com/hashicorp/hcl/v2"
)

// Pos renders the start of a range as file:line:col, the form editors and
// terminals turn into links.
func Pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// DiagString renders one diagnostic on one line: "web.hcl:3:15: Summary: Detail".
func DiagString(d *hcl.Diagnostic) string {
	var b strings.Builder
	if d.Subject != nil {
		b.WriteString(Pos(*d.Subject))
		b.WriteString(": ")
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(d.Detail)
	}
	return b.String()
}

// WriteDiagnostics writes each diagnostic as a file:line:col headline, the
// source line with a caret under the offending token, and the detail:
//
//	web.hcl:3:15: error: Invalid value for "instances"
//	    3 |   instances = -1
//	      |               ^^
//	  "instances" expects an integer from 0 to 10000, but got -1.
//
// hcl's own text writer shows the line but marks the token only with
// terminal colours, which a log or a CI page loses; the caret survives both.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	bw := bufio.NewWriter(w)
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		if d.Subject != nil {
			fmt.Fprintf(bw, "%s: %s: %s\n", Pos(*d.Subject), sev, d.Summary)
			if f := files[d.Subject.Filename]; f != nil {
				writeSnippet(bw, f.Bytes, *d.Subject)
			}
		} else {
			fmt.Fprintf(bw, "%s: %s\n", sev, d.Summary)
		}
		if d.Detail != "" {
			fmt.Fprintf(bw, "  %s\n", d.Detail)
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// snippetWidth is the most characters of a source line a snippet shows.
const snippetWidth = 160

// writeSnippet prints the subject's first line and a caret line under the
// subject. Tabs in the line are kept in the padding so the caret lines up.
func writeSnippet(w io.Writer, src []byte, r hcl.Range) {
	if r.Start.Line < 1 || r.Start.Byte < 0 || r.Start.Byte > len(src) {
		return
	}
	lineStart := bytes.LastIndexByte(src[:r.Start.Byte], '\n') + 1
	lineEnd := len(src)
	if i := bytes.IndexByte(src[r.Start.Byte:], '\n'); i >= 0 {
		lineEnd = r.Start.Byte + i
	}
	line := strings.TrimRight(string(src[lineStart:lineEnd]), "\r")
	end := min(max(r.End.Byte, r.Start.Byte), lineStart+len(line))
	width := max(len([]rune(string(src[r.Start.Byte:max(end, r.Start.Byte)]))), 1)
	// A hostile file's line may be 100,000 characters or hold characters
	// that reorder the terminal's text: show a clean window of it.
	shown, col := hclcheck.Excerpt(line, 1+utf8.RuneCount(src[lineStart:r.Start.Byte]), snippetWidth)
	var pad strings.Builder
	for i, c := range []rune(shown) {
		if i >= col-1 {
			break
		}
		if c == '\t' {
			pad.WriteByte('\t')
		} else {
			pad.WriteByte(' ')
		}
	}
	width = max(min(width, utf8.RuneCountInString(shown)-col+1), 1)
	line = shown
	gutter := fmt.Sprintf("%5d", r.Start.Line)
	fmt.Fprintf(w, "%s | %s\n", gutter, line)
	fmt.Fprintf(w, "%s | %s%s\n", strings.Repeat(" ", len(gutter)), pad.String(), strings.Repeat("^", width))
}
