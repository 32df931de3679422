package spec

import (
	"bytes"
	"sort"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Service files may put several attributes of a block on one line, as the
// key schema's examples do:
//
//	resources { cpu = 0.5  memory = "256Mi" }
//
// Plain HCL allows one attribute in a one-line block. Rather than make users
// spread every small block over four lines, the decoder inserts the newlines
// HCL wants before parsing (splitLines), and maps every position the parser
// reports back to the file as written (remap), so diagnostics still point at
// the user's own line and column.

// splitLines returns src with a newline inserted after a block's '{', before
// its '}', and before each item that shares a line with the previous one,
// together with the offsets (in src) where newlines were inserted. It looks
// only at block bodies: object values, lists, calls and strings are left as
// they are. A source that does not lex is returned unchanged, for the parser
// to report.
func splitLines(src []byte, filename string) ([]byte, []int) {
	toks, diags := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return src, nil
	}
	type ctx byte
	const (
		block ctx = iota // a block body, or the file's top level
		other            // an object, list, call, string or template
	)
	stack := []ctx{block}
	var at []int
	// endsLine: the previous token, comments aside, ends a line (a newline,
	// a line comment that swallowed one, or the start of the file).
	endsLine := true
	var prev hclsyntax.TokenType // the previous significant token
	inAttr := false              // inside an attribute's value at this block level
	insert := func(off int) {
		if !endsLine && (len(at) == 0 || at[len(at)-1] != off) {
			at = append(at, off)
		}
		endsLine = true
		inAttr = false
	}
	for i, tk := range toks {
		top := stack[len(stack)-1]
		switch tk.Type {
		case hclsyntax.TokenComment:
			if bytes.HasSuffix(tk.Bytes, []byte("\n")) {
				endsLine, inAttr = true, false
			}
			continue
		case hclsyntax.TokenNewline:
			if top == block {
				endsLine, inAttr = true, false
			}
			prev = tk.Type
			continue
		}
		start := tk.Range.Start.Byte
		switch tk.Type {
		case hclsyntax.TokenIdent:
			if top == block {
				next := hclsyntax.TokenNil
				for _, n := range toks[i+1:] {
					if n.Type != hclsyntax.TokenComment {
						next = n.Type
						break
					}
				}
				switch {
				case next == hclsyntax.TokenEqual:
					insert(start)
					inAttr = true
				case inAttr && endsOperand(prev), prev == hclsyntax.TokenCBrace:
					insert(start) // a block starting after an attribute or block
				}
			}
		case hclsyntax.TokenOBrace:
			if top == block && !inAttr && (prev == hclsyntax.TokenIdent || prev == hclsyntax.TokenCQuote) {
				stack = append(stack, block)
				prev, endsLine = tk.Type, false
				// The body starts on a line of its own unless it is empty.
				if i+1 < len(toks) && toks[i+1].Type != hclsyntax.TokenCBrace &&
					toks[i+1].Type != hclsyntax.TokenNewline && toks[i+1].Type != hclsyntax.TokenComment {
					insert(toks[i+1].Range.Start.Byte)
				}
				endsLine = true
				continue
			}
			stack = append(stack, other)
		case hclsyntax.TokenCBrace:
			if len(stack) > 1 {
				if top == block && prev != hclsyntax.TokenOBrace {
					insert(start)
				}
				stack = stack[:len(stack)-1]
				if top == block {
					inAttr = false
				}
			}
		case hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			stack = append(stack, other)
		case hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc,
			hclsyntax.TokenTemplateSeqEnd:
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
		}
		prev, endsLine = tk.Type, false
	}
	if len(at) == 0 {
		return src, nil
	}
	out := make([]byte, 0, len(src)+len(at))
	last := 0
	for _, off := range at {
		out = append(out, src[last:off]...)
		out = append(out, '\n')
		last = off
	}
	return append(out, src[last:]...), at
}

// endsOperand reports whether a token can end an attribute's value, so that
// an identifier right after it must start the next item.
func endsOperand(t hclsyntax.TokenType) bool {
	switch t {
	case hclsyntax.TokenNumberLit, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc, hclsyntax.TokenIdent,
		hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCBrace:
		return true
	}
	return false
}

// remapper turns positions in the split source back into positions in the
// source as written.
type remapper struct {
	src []byte
	at  []int // offsets in src where a newline was inserted, ascending
}

func (m remapper) pos(p hcl.Pos) hcl.Pos {
	// The i-th inserted newline sits at offset at[i]+i of the split source,
	// so k newlines lie before offset n; one at n itself maps to where it
	// was inserted.
	n := p.Byte
	k := sort.Search(len(m.at), func(i int) bool { return m.at[i]+i >= n })
	b := min(max(n-k, 0), len(m.src))
	lineStart := bytes.LastIndexByte(m.src[:b], '\n') + 1
	line := 1 + bytes.Count(m.src[:lineStart], []byte("\n"))
	col := 1 + utf8.RuneCount(m.src[lineStart:b])
	return hcl.Pos{Line: line, Column: col, Byte: b}
}

// rng returns a copy of r in the source as written.
func (m remapper) rng(r hcl.Range) hcl.Range {
	if len(m.at) == 0 {
		return r
	}
	r.Start, r.End = m.pos(r.Start), m.pos(r.End)
	return r
}

// ptr is rng for the optional ranges of a diagnostic; it never changes the
// range r points to, which may belong to the syntax tree.
func (m remapper) ptr(r *hcl.Range) *hcl.Range {
	if r == nil {
		return nil
	}
	c := m.rng(*r)
	return &c
}
