package spec

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// errWrongType is an HCL value of another type than the attribute's.
var errWrongType = errors.New("wrong type")

// badValue reports an attribute whose value the schema refused. A value
// over one of facts' limits, or holding a character user text may not
// hold, gets a diagnostic that names the limit or the character and points
// at it; anything else says what the attribute expects.
func (d *decoder) badValue(at *hcl.Attribute, a attr, v cty.Value, err error) {
	var lim *facts.LimitError
	var txt *facts.TextError
	switch {
	case errors.As(err, &lim) && lim.Unit == "bytes":
		d.errorAt(d.inString(at, v, lim.Offset), at, fmt.Sprintf("%s of %d bytes is over the limit of %d (%s)", a.name, lim.Got, lim.Max, lim.Name),
			"%q may be at most %d bytes (facts.%s), but this one is %d bytes, starting %s; shorten it.",
			a.name, lim.Max, lim.Name, lim.Got, show(v))
	case errors.As(err, &lim):
		d.errorAt(d.m.ptr(at.Expr.Range().Ptr()), at, fmt.Sprintf("%s = %s is over the limit of %d %s (%s)", a.name, show(v), lim.Max, lim.Unit, lim.Name),
			"A service may have at most %d %s (facts.%s): the count the user asks for, the autoscaler's min and max and a rollout's extras alike. Ask for fewer, or split the workload into several services.",
			lim.Max, lim.Unit, lim.Name)
	case errors.As(err, &txt):
		what := fmt.Sprintf("character %U", txt.Rune)
		if txt.Invalid {
			what = "invalid UTF-8"
		}
		d.errorAt(d.inString(at, v, txt.Offset), at, fmt.Sprintf("%s%s not allowed in %q", string(bytes.ToUpper([]byte(what[:1]))), what[1:], a.name),
			"%q holds %v. Remove it; a value copied from elsewhere is best typed again.", a.name, txt)
	default:
		d.errorf(at.Expr.Range().Ptr(), at.Range.Ptr(), fmt.Sprintf("Invalid value for %q", a.name),
			"%q expects %s, but got %s.", a.name, expected(a.vt), show(v))
	}
}

// errorAt is errorf for a subject already in the file as written.
func (d *decoder) errorAt(subject *hcl.Range, at *hcl.Attribute, summary, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject,
		Context:  d.m.ptr(at.Range.Ptr()),
	})
}

// inString is the range, in the file as written, of the character at byte
// off of the string value v: exact when the literal is written without
// escapes, else the whole expression.
func (d *decoder) inString(at *hcl.Attribute, v cty.Value, off int) *hcl.Range {
	r := d.m.rng(at.Expr.Range())
	src := d.m.src
	if v.Type() != cty.String || r.Start.Byte < 0 || r.End.Byte > len(src) || r.End.Byte-r.Start.Byte < 2 {
		return &r
	}
	lit := src[r.Start.Byte+1 : r.End.Byte-1]
	s := v.AsString()
	if src[r.Start.Byte] != '"' || string(lit) != s || off < 0 || off > len(s) {
		return &r
	}
	b := r.Start.Byte + 1 + off
	lineStart := bytes.LastIndexByte(src[:b], '\n') + 1
	p := hcl.Pos{Line: 1 + bytes.Count(src[:lineStart], []byte("\n")), Column: 1 + utf8.RuneCount(src[lineStart:b]), Byte: b}
	_, size := utf8.DecodeRune(src[b:])
	return &hcl.Range{Filename: r.Filename, Start: p, End: hcl.Pos{Line: p.Line, Column: p.Column + 1, Byte: b + size}}
}
