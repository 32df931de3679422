// Package hclcheck refuses an HCL file that is too large or nests too
// deeply before it is parsed.
//
// hclsyntax's parser and the evaluator of its expressions recurse once per
// level of nesting, and a goroutine that runs out of stack is a fatal error
// Go cannot recover: 100,000 '[' in a service file killed `ccattler apply`,
// and a rule file dropped into a watched directory killed the server with
// its embedded etcd. Source bounds the size first, then counts the depth
// over the tokens of hclsyntax's own lexer, which is not recursive: strings,
// heredocs, comments and template sequences are seen exactly as the parser
// will see them, so no text can hide nesting from the count:
//
//	if diags := hclcheck.Source("web.hcl", src); diags.HasErrors() {
//		return diags // web.hcl:1:118: File nests deeper than 100 levels
//	}
//
// Brackets inside quoted strings, heredocs and comments do not count;
// template sequences (${ and %{) inside them do, and so do the if and for
// directives of a template, which nest like brackets. Lexing is linear and
// bounded by facts.MaxFileBytes (256 KiB of '[' is checked in about 60 ms);
// the parser that follows lexes the file again anyway.
package hclcheck
