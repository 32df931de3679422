package rules

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// strLit is a string attribute's value with enough of its source to point
// at a position inside it: CEL errors and template segments are reported at
// the exact character in the HCL file, not at the start of the string.
type strLit struct {
	val   string
	rng   hcl.Range // the whole expression
	start int       // file byte offset where val's text begins; -1 when escapes hide it
	src   []byte    // the file's source
}

// stringOf evaluates expr as a constant string. what names the attribute
// for the error ("a CEL expression", "a key template").
func stringOf(expr hcl.Expression, src []byte, what string) (strLit, hcl.Diagnostics) {
	v, diags := expr.Value(nil)
	rng := expr.Range()
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return strLit{}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Expected a string",
			Detail:   fmt.Sprintf("Expected %s as a quoted string, e.g. \"state == 'running'\". Use single quotes for strings inside CEL.", what),
			Subject:  &rng,
		}}
	}
	s := strLit{val: v.AsString(), rng: rng, start: -1, src: src}
	if rng.End.Byte <= len(src) && rng.Start.Byte < rng.End.Byte {
		raw := string(src[rng.Start.Byte:rng.End.Byte])
		if i := strings.Index(raw, s.val); i >= 0 && s.val != "" {
			s.start = rng.Start.Byte + i
		}
	}
	return s, nil
}

// rangeAt returns the file range of n bytes at byte offset off of the value.
// Unknown positions fall back to the whole expression.
func (s strLit) rangeAt(off, n int) hcl.Range {
	if s.start < 0 || off < 0 || off > len(s.val) {
		return s.rng
	}
	if n < 1 {
		n = 1
	}
	if off+n > len(s.val) {
		n = len(s.val) - off
		if n < 1 {
			// the end of the expression: point at the closing quote
			p := s.posAt(s.start + off)
			return hcl.Range{Filename: s.rng.Filename, Start: p, End: hcl.Pos{Line: p.Line, Column: p.Column + 1, Byte: p.Byte + 1}}
		}
	}
	return hcl.Range{Filename: s.rng.Filename, Start: s.posAt(s.start + off), End: s.posAt(s.start + off + n)}
}

// posAt walks from the expression's start to a file byte offset.
func (s strLit) posAt(target int) hcl.Pos {
	p := s.rng.Start
	for p.Byte < target && p.Byte < len(s.src) {
		r, size := utf8.DecodeRune(s.src[p.Byte:])
		p.Byte += size
		if r == '\n' {
			p.Line++
			p.Column = 1
		} else {
			p.Column++
		}
	}
	return p
}

// offsetOf converts a CEL location (1-based line, 0-based column in code
// points) to a byte offset in the value.
func (s strLit) offsetOf(line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(s.val[off:], '\n')
		if i < 0 {
			return len(s.val)
		}
		off += i + 1
	}
	for c := 0; c < col && off < len(s.val); c++ {
		_, size := utf8.DecodeRuneInString(s.val[off:])
		off += size
	}
	return off
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reserved are names a rule may not bind: CEL keywords and the clock.
var reserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true,
	"const": true, "continue": true, "else": true, "for": true, "function": true,
	"if": true, "import": true, "let": true, "loop": true, "package": true,
	"namespace": true, "return": true, "var": true, "void": true, "while": true,
	NowVar: true,
}

// checkIdent reports a name that CEL cannot use as a variable.
func checkIdent(name, what string, rng hcl.Range) *hcl.Diagnostic {
	if !identRE.MatchString(name) {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid variable name",
			Detail:  fmt.Sprintf("%s %q is not a CEL identifier: use letters, digits and '_', starting with a letter or '_' (e.g. %s).", what, name, strings.ReplaceAll(name, "-", "_")),
			Subject: &rng}
	}
	if reserved[name] {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Reserved name",
			Detail: fmt.Sprintf("%s %q is reserved in CEL expressions; choose another name.", what, name), Subject: &rng}
	}
	return nil
}

// levenshtein is the edit distance between a and b.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			c := prev[j-1]
			if ra[i-1] != rb[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Closest returns the candidate nearest to s, if it is near enough to be a
// plausible typo: what a "did you mean" names, here and in the rule tests
// (engine/eval/ruletest).
func Closest(s string, candidates []string) (string, bool) {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := levenshtein(s, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best, bestD >= 0 && bestD <= max(3, len(s)/3)
}
