package hclcheck

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// WriteDiagnostics writes each diagnostic as a file:line:col headline, the
// source line with a caret under the offending token, and the detail, each
// of its lines indented:
//
//	web.hcl:3:15: error: Invalid value for "instances"
//	    3 |   instances = -1
//	      |               ^^
//	  "instances" expects an integer from 0 to 10000, but got -1.
//
// files are the parsed sources by name; a diagnostic whose file is not
// among them, or that has no subject, is written without a snippet.
// numWidth is the width of the line number column. hcl's own text writer
// shows the line but marks the token only with terminal colours, which a
// log or a CI page loses; the caret survives both. Rule files and service
// files are both printed here (package rules, package spec).
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, numWidth int) error {
	bw := bufio.NewWriter(w)
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		if s := d.Subject; s != nil {
			fmt.Fprintf(bw, "%s:%d:%d: %s: %s\n", s.Filename, s.Start.Line, s.Start.Column, sev, d.Summary)
			if f := files[s.Filename]; f != nil {
				writeSnippet(bw, f.Bytes, *s, numWidth)
			}
		} else {
			fmt.Fprintf(bw, "%s: %s\n", sev, d.Summary)
		}
		if d.Detail != "" {
			for _, line := range strings.Split(d.Detail, "\n") {
				fmt.Fprintf(bw, "  %s\n", line)
			}
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// SnippetWidth is the most characters of a source line a snippet shows.
const SnippetWidth = 160

// writeSnippet prints the subject's first line and a caret line under the
// subject. Tabs in the line are kept in the padding so the caret lines up.
func writeSnippet(w io.Writer, src []byte, r hcl.Range, numWidth int) {
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
	width := max(utf8.RuneCount(src[r.Start.Byte:max(end, r.Start.Byte)]), 1)
	// A hostile file's line may be 100,000 characters or hold characters
	// that reorder the terminal's text: show a clean window of it.
	shown, col := Excerpt(line, 1+utf8.RuneCount(src[lineStart:r.Start.Byte]), SnippetWidth)
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
	gutter := fmt.Sprintf("%*d", numWidth, r.Start.Line)
	fmt.Fprintf(w, "%s | %s\n", gutter, shown)
	fmt.Fprintf(w, "%s | %s%s\n", strings.Repeat(" ", len(gutter)), pad.String(), strings.Repeat("^", width))
}
