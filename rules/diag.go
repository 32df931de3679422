package rules

import (
	"io"

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
// without a snippet). The printer is the service files' too
// (hclcheck.WriteDiagnostics); rule files number their lines four wide.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	return hclcheck.WriteDiagnostics(w, files, diags, 4)
}
