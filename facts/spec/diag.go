package spec

import (
	"fmt"
	"io"
	"strings"

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
// The printer is the rule files' too (hclcheck.WriteDiagnostics); service
// files number their lines five wide.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	return hclcheck.WriteDiagnostics(w, files, diags, 5)
}
