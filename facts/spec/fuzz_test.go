package spec

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
)

// FuzzDecode checks that no file makes the decoder panic, that every
// diagnostic points inside the file at a consistent line and column, and
// that a file without errors renders only valid facts of the schema. Its
// seed corpus is in testdata/fuzz/FuzzDecode and runs with the normal tests.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("service \"web\" {\n  image     = \"nginx:1.28\"\n  instances = 3\n  expose    = [8080]\n}\n"))
	// The file that killed apply with a stack overflow: 100,000 '['
	// (testdata holds a short one, so the corpus stays small).
	f.Add([]byte("service \"web\" {\n  instances = " + strings.Repeat("[", 100000) + "\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		doc, diags := Decode(Source{Name: "fuzz.hcl", Bytes: src})
		for _, d := range diags {
			for _, r := range []*hcl.Range{d.Subject, d.Context} {
				if r != nil {
					checkPos(t, src, r.Start, d)
					checkPos(t, src, r.End, d)
				}
			}
		}
		if diags.HasErrors() {
			return
		}
		seen := map[string]bool{}
		for _, fc := range doc.Facts() {
			if seen[fc.Key] {
				t.Fatalf("fact %s rendered twice", fc.Key)
			}
			seen[fc.Key] = true
			if _, err := facts.Default.Validate(fc.Key, fc.Value); err != nil {
				t.Fatalf("rendered an invalid fact: %v", err)
			}
		}
		again, _ := Decode(Source{Name: "fuzz.hcl", Bytes: src})
		a, b := doc.Facts(), again.Facts()
		if len(a) != len(b) {
			t.Fatalf("decoding twice gave %d and %d facts", len(a), len(b))
		}
		for i := range a {
			if a[i].Key != b[i].Key || !bytes.Equal(a[i].Value, b[i].Value) {
				t.Fatalf("decoding twice differs at %s", a[i].Key)
			}
		}
	})
}

// checkPos asserts that p's line and column agree with its byte offset in
// src, which is what remapping one-line blocks must preserve.
func checkPos(t *testing.T, src []byte, p hcl.Pos, d *hcl.Diagnostic) {
	t.Helper()
	if p.Byte < 0 || p.Byte > len(src) {
		t.Fatalf("%s: byte offset %d outside the file of %d bytes", DiagString(d), p.Byte, len(src))
	}
	if !utf8.Valid(src) {
		return // hcl counts columns of invalid UTF-8 its own way
	}
	lineStart := bytes.LastIndexByte(src[:p.Byte], '\n') + 1
	line := 1 + bytes.Count(src[:lineStart], []byte("\n"))
	if p.Line != line {
		t.Fatalf("%s: line %d, but byte %d is on line %d", DiagString(d), p.Line, p.Byte, line)
	}
}
