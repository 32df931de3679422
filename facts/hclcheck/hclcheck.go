package hclcheck

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Source checks src, the text of the file filename, against
// facts.MaxFileBytes and facts.MaxNestingDepth. The diagnostic points at
// the byte where the limit was crossed.
func Source(filename string, src []byte) hcl.Diagnostics {
	if len(src) > facts.MaxFileBytes {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("File larger than %d bytes (MaxFileBytes)", facts.MaxFileBytes),
			Detail: fmt.Sprintf("%s holds more than %d bytes, the most an HCL file may hold (facts.MaxFileBytes), so it is refused before parsing. Split it into several files.",
				filename, facts.MaxFileBytes),
			Subject: pointAt(filename, src, facts.MaxFileBytes),
		}}
	}
	if rng := tooDeep(filename, src, facts.MaxNestingDepth); rng != nil {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  fmt.Sprintf("File nests deeper than %d levels (MaxNestingDepth)", facts.MaxNestingDepth),
			Detail: fmt.Sprintf("At this point %s nests more than %d levels of brackets, braces, parentheses, strings, template sequences or operators of one expression (facts.MaxNestingDepth); HCL's parser recurses once per level, so the file is refused before parsing. Flatten the expression or split it.",
				filename, facts.MaxNestingDepth),
			Subject: rng,
		}}
	}
	return nil
}

// ReadFile reads at most facts.MaxFileBytes+1 bytes of a file: enough for
// Source to refuse one that is too large, without first holding a 10 GB
// file (or /dev/zero) in memory.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, facts.MaxFileBytes+1))
}

// pointAt is the range of the one character at byte off of src.
func pointAt(filename string, src []byte, off int) *hcl.Range {
	off = min(off, len(src))
	lineStart := bytes.LastIndexByte(src[:off], '\n') + 1
	p := hcl.Pos{Line: 1 + bytes.Count(src[:lineStart], []byte("\n")), Column: 1 + utf8.RuneCount(src[lineStart:off]), Byte: off}
	end := p
	if off < len(src) {
		_, size := utf8.DecodeRune(src[off:])
		end.Byte += size
		end.Column++
	}
	return &hcl.Range{Filename: filename, Start: p, End: end}
}

// frame is one open level: a bracket, brace or parenthesis, a template
// sequence, or a string or heredoc.
type frame struct {
	open hclsyntax.TokenType
	ops  int // operators of the expression being read at this level
	tmpl int // open %{ if } and %{ for } directives of a string or heredoc
}

// levels is what one frame adds to the depth.
func (f frame) levels() int { return 1 + f.ops + f.tmpl }

// counter keeps the depth while tokens go by.
type counter struct {
	stack []frame // [0] is the file's top level, never popped
	depth int     // the sum of the frames' levels, less the top level's 1
}

func (c *counter) top() *frame { return &c.stack[len(c.stack)-1] }

func (c *counter) push(open hclsyntax.TokenType) {
	c.stack = append(c.stack, frame{open: open})
	c.depth++
}

// pop closes the top level if one of opens opened it. A closer that does
// not match (a file with a syntax error) closes nothing: the count may
// then run high, never low, whatever the parser makes of the rest.
func (c *counter) pop(opens ...hclsyntax.TokenType) {
	if len(c.stack) < 2 {
		return
	}
	f := c.stack[len(c.stack)-1]
	for _, o := range opens {
		if f.open == o {
			c.depth -= f.levels()
			c.stack = c.stack[:len(c.stack)-1]
			return
		}
	}
}

func (c *counter) op() {
	c.top().ops++
	c.depth++
}

// endExpr forgets the operators of the expression that just ended.
func (c *counter) endExpr() {
	c.depth -= c.top().ops
	c.top().ops = 0
}

// tooDeep returns the token at which src nests deeper than max, or nil.
// Operators count because the parser builds a+b+c as ((a+b)+c) and the
// evaluator recurses through it; they are counted per expression, which a
// comma or an '=' ends. A newline does not: inside parentheses or a for
// expression one expression spans lines.
func tooDeep(filename string, src []byte, max int) *hcl.Range {
	toks, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	c := counter{stack: []frame{{}}}
	operand := false // the last token ends an operand: a '[' after it indexes
	for i, tk := range toks {
		wasOperand := operand
		operand = false
		switch tk.Type {
		case hclsyntax.TokenNewline, hclsyntax.TokenComment:
			operand = wasOperand
			continue
		case hclsyntax.TokenOBrack:
			if wasOperand {
				c.op()
			}
			c.push(tk.Type)
		case hclsyntax.TokenOBrace, hclsyntax.TokenOParen, hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc,
			hclsyntax.TokenTemplateInterp:
			c.push(tk.Type)
		case hclsyntax.TokenTemplateControl:
			// An if or for directive nests the template it is in until
			// its end directive: the template parser recurses into it.
			switch directive(toks[i+1:]) {
			case "if", "for":
				c.top().tmpl++
				c.depth++
			case "endif", "endfor":
				if t := c.top(); t.tmpl > 0 {
					t.tmpl--
					c.depth--
				}
			}
			c.push(tk.Type)
		case hclsyntax.TokenCBrack:
			c.pop(hclsyntax.TokenOBrack)
			operand = true
		case hclsyntax.TokenCParen:
			c.pop(hclsyntax.TokenOParen)
			operand = true
		case hclsyntax.TokenCBrace:
			c.pop(hclsyntax.TokenOBrace)
			operand = true
		case hclsyntax.TokenTemplateSeqEnd:
			// The lexer also ends a sequence with "~}" after a plain '{'.
			c.pop(hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl, hclsyntax.TokenOBrace)
			operand = true
		case hclsyntax.TokenCQuote:
			c.pop(hclsyntax.TokenOQuote)
			operand = true
		case hclsyntax.TokenCHeredoc:
			c.pop(hclsyntax.TokenOHeredoc)
			operand = true
		case hclsyntax.TokenComma, hclsyntax.TokenEqual:
			c.endExpr()
		case hclsyntax.TokenIdent, hclsyntax.TokenNumberLit:
			operand = true
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash, hclsyntax.TokenPercent,
			hclsyntax.TokenBang, hclsyntax.TokenQuestion, hclsyntax.TokenAnd, hclsyntax.TokenOr,
			hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq,
			hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq, hclsyntax.TokenDot:
			c.op()
		}
		if c.depth > max {
			return tk.Range.Ptr()
		}
	}
	return nil
}

// directive is the keyword after a %{, comments and newlines aside.
func directive(toks hclsyntax.Tokens) string {
	for _, tk := range toks {
		switch tk.Type {
		case hclsyntax.TokenNewline, hclsyntax.TokenComment:
			continue
		case hclsyntax.TokenIdent:
			return string(tk.Bytes)
		}
		return ""
	}
	return ""
}

// Excerpt prepares a source line for a diagnostic's snippet: characters
// that would reorder or hide the text on a terminal (see facts.CheckText;
// tabs are kept) show as U+FFFD, and a line longer than width runes is cut
// to a window around column col (1-based). It returns the line to show and
// the column of col in it, so that a caret lines up under it.
func Excerpt(line string, col, width int) (string, int) {
	rs := []rune(line)
	for i, r := range rs {
		if r != '\t' && facts.CheckText(string(r)) != nil {
			rs[i] = utf8.RuneError
		}
	}
	if len(rs) <= width {
		return string(rs), col
	}
	start := max(0, min(col-1-width/2, len(rs)-width))
	end := min(len(rs), start+width)
	shown := string(rs[start:end])
	if start > 0 {
		shown = "..." + shown
		col = col - start + 3
	}
	if end < len(rs) {
		shown += "..."
	}
	return shown, col
}
