package hclcheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// deep is n levels of open...close around x, as one line.
func deep(open, x, close string, n int) string {
	return strings.Repeat(open, n) + x + strings.Repeat(close, n)
}

func TestSource(t *testing.T) {
	max := facts.MaxNestingDepth
	tests := []struct {
		name string
		src  string
		at   string // the token at which the limit is crossed, or one of them separated by |; "" for accepted
	}{
		{"100,000 brackets, unclosed", "a = " + strings.Repeat("[", 100000), "["},
		{"brackets at the limit", "a = " + deep("[", "1", "]", max), ""},
		{"brackets one past the limit", "a = " + deep("[", "1", "]", max+1), "["},
		{"objects", "a = " + deep("{ b = ", "1", " }", 200), "{"},
		{"parentheses", "a = " + deep("(", "1", ")", 200), "("},
		{"blocks", deep("b {\n", "", "}\n", 200), "{"},
		{"nested template sequences", "a = " + deep(`"${`, "1", `}"`, 100), `${|"`},
		{"nested if directives", "a = \"" + deep("%{ if true }", "x", "%{ endif }", 200) + "\"", "%{"},
		{"a chain of additions", "a = 1" + strings.Repeat(" + 1", 50000), "+"},
		{"a chain of negations", "a = " + strings.Repeat("-", 5000) + "1", "-"},
		{"a chain of conditionals", "a = " + strings.Repeat("true ? 1 : ", 5000) + "1", "?"},
		{"a chain of index operations", "a = b" + strings.Repeat("[c]", 5000), "["},
		{"a long flat list", "a = [" + strings.Repeat("1 + 1, ", 30000) + "1]", ""},
		{"many attributes", strings.Repeat("a = 1 + 1 + 1\n", 15000), ""},
		{"brackets in a string", `a = "` + strings.Repeat("[", 5000) + `"`, ""},
		{"brackets in a comment", "# " + strings.Repeat("[", 5000) + "\n// " + strings.Repeat("(", 5000) + "\n/* " + strings.Repeat("{", 5000) + " */\na = 1\n", ""},
		{"brackets in a heredoc", "a = <<EOT\n" + strings.Repeat("[", 5000) + "\n\"\nEOT\nb = 1\n", ""},
		{"brackets after a heredoc", "a = <<-EOT\n  \" [ \n  EOT\nb = " + strings.Repeat("[", 5000) + "\n", "["},
		{"an escaped quote does not end a string", `a = "\" ` + strings.Repeat("[", 5000) + `"`, ""},
		{"$${ is not a template sequence", `a = "` + strings.Repeat("$${", 5000) + `"`, ""},
		{"closers that do not match close nothing", "a = " + strings.Repeat("[(}", 200), "[|("},
		{"a template sequence inside a heredoc", "a = <<EOT\n" + deep("${[", "1", "]}", 200) + "\nEOT\n", "${|["},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			diags := Source("f.hcl", []byte(tc.src))
			if tc.at == "" {
				if diags.HasErrors() {
					t.Fatalf("refused: %s", diags.Error())
				}
				parse(t, []byte(tc.src)) // and it must not crash the parser
				return
			}
			if len(diags) != 1 || diags[0].Subject == nil {
				t.Fatalf("want one diagnostic with a position, got %v", diags)
			}
			d := diags[0]
			if !strings.Contains(d.Summary, "MaxNestingDepth") || !strings.Contains(d.Summary, "100") {
				t.Errorf("summary %q does not name the limit", d.Summary)
			}
			r := d.Subject
			if got := tc.src[r.Start.Byte:r.End.Byte]; !slices.Contains(strings.Split(tc.at, "|"), got) {
				t.Errorf("crossed at %q (byte %d), want %q", got, r.Start.Byte, tc.at)
			}
			if r.Start.Line != 1+strings.Count(tc.src[:r.Start.Byte], "\n") {
				t.Errorf("line %d does not match byte %d", r.Start.Line, r.Start.Byte)
			}
		})
	}
}

func TestSourceSize(t *testing.T) {
	src := []byte(strings.Repeat("a = 1\n", facts.MaxFileBytes/6+1))
	diags := Source("big.hcl", src)
	if len(diags) != 1 || !strings.Contains(diags[0].Summary, "MaxFileBytes") || diags[0].Subject == nil {
		t.Fatalf("a file of %d bytes: %v", len(src), diags)
	}
	if r := diags[0].Subject; r.Start.Byte != facts.MaxFileBytes || r.Start.Line != 1+facts.MaxFileBytes/6 {
		t.Errorf("points at %v, want byte %d", r.Start, facts.MaxFileBytes)
	}
	if diags := Source("ok.hcl", src[:facts.MaxFileBytes]); diags.HasErrors() {
		t.Errorf("a file of exactly MaxFileBytes refused: %s", diags.Error())
	}
}

// Every HCL file the project ships is well inside the limits.
func TestProjectFilesPass(t *testing.T) {
	n := 0
	err := filepath.WalkDir("../..", func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".hcl") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		if d := tooDeep(p, src, 20); d != nil {
			t.Errorf("%s nests past 20 levels at %s", p, d)
		}
		return nil
	})
	if err != nil || n < 20 {
		t.Fatalf("walked %d .hcl files: %v", n, err)
	}
}

// FuzzSource: a file Source accepts is parsed and every attribute in it
// evaluated without running out of stack; a refusal points inside the file.
func FuzzSource(f *testing.F) {
	f.Add([]byte("a = [[1], {b = (2 + 3)}]\n"))
	f.Add([]byte("a = \"${x}%{ if y }z%{ endif }\"\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		diags := Source("f.hcl", src)
		if diags.HasErrors() {
			if r := diags[0].Subject; r == nil || r.Start.Byte < 0 || r.Start.Byte > len(src) {
				t.Fatalf("refusal outside the file: %v", diags)
			}
			return
		}
		parse(t, src)
	})
}

// parse parses src and evaluates every attribute, in blocks too.
func parse(t *testing.T, src []byte) {
	t.Helper()
	f, _ := hclsyntax.ParseConfig(src, "f.hcl", hcl.InitialPos)
	if f == nil {
		return
	}
	var walk func(b *hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for _, a := range b.Attributes {
			_, _ = a.Expr.Value(nil)
		}
		for _, bl := range b.Blocks {
			walk(bl.Body)
		}
	}
	if b, ok := f.Body.(*hclsyntax.Body); ok {
		walk(b)
	}
}

// depthWalker measures how deeply the syntax tree of a file nests.
type depthWalker struct{ cur, max int }

func (w *depthWalker) Enter(hclsyntax.Node) hcl.Diagnostics {
	w.cur++
	w.max = max(w.max, w.cur)
	return nil
}
func (w *depthWalker) Exit(hclsyntax.Node) hcl.Diagnostics { w.cur--; return nil }

// FuzzCountBoundsTree: the count is sound. Whatever the file, when the
// count stays within a small limit, so does the depth of the syntax tree
// the parser builds from it (each level of the count is at most a few
// nodes: an object item's key wrapper, a template's parts, a splat's
// parts); the parser's and the evaluator's recursion follow that tree.
func FuzzCountBoundsTree(f *testing.F) {
	f.Add([]byte("a = [[1], {b = (2 + 3)}]\n"))
	f.Add([]byte("a = \"${x}%{ if y }z%{ endif }\"\nb { c = d[e][f].g }\n"))
	f.Add([]byte("a = [for k, v in x : k => -v if !v]\nb = x[*].y ? 1 : 2\n"))
	f.Add([]byte("a = <<EOT\n${[1]}\nEOT\n"))
	// Each of these nests its tree 50 levels deep through one kind of
	// token: a count that missed that kind would let it through.
	for _, deep := range []string{
		"a = 1" + strings.Repeat(" + 1", 50), "a = " + strings.Repeat("!", 50) + "true",
		"a = " + strings.Repeat("x ? 1 : ", 50) + "1", "a = b" + strings.Repeat("[c]", 50),
		"a = " + deep("[", "1", "]", 50), "a = " + deep("f(", "1", ")", 50), "a = " + deep("{b = ", "1", "}", 50),
		"a = " + deep(`"${`, "1", `}"`, 50), "a = \"" + deep("%{ if x }", "y", "%{ endif }", 50) + "\"",
		deep("b {\n", "", "}\n", 50),
	} {
		f.Add([]byte(deep + "\n"))
	}
	const limit = 8
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > 4096 || tooDeep("f.hcl", src, limit) != nil {
			return
		}
		file, _ := hclsyntax.ParseConfig(src, "f.hcl", hcl.InitialPos)
		if file == nil {
			return
		}
		w := &depthWalker{}
		hclsyntax.Walk(file.Body.(*hclsyntax.Body), w)
		if w.max > 4*(limit+2) {
			t.Fatalf("counted at most %d levels, but the tree nests %d nodes deep", limit, w.max)
		}
	})
}

// A file of 10 GB (sparse here) or an endless one is read only up to one
// byte past the limit, and refused.
func TestReadFileBounded(t *testing.T) {
	huge := filepath.Join(t.TempDir(), "huge.hcl")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 10<<30); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{huge, "/dev/zero"} {
		b, err := ReadFile(p)
		if err != nil || len(b) != facts.MaxFileBytes+1 {
			t.Fatalf("ReadFile(%s) = %d bytes, %v; want %d", p, len(b), err, facts.MaxFileBytes+1)
		}
		if d := Source(p, b); !d.HasErrors() || !strings.Contains(d[0].Summary, "MaxFileBytes") {
			t.Errorf("%s: %v", p, d)
		}
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing.hcl")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

// BenchmarkSource: the check on the largest default policy, and on the
// worst file under the size limit (one token per byte, refused).
func BenchmarkSource(b *testing.B) {
	policy, err := os.ReadFile("../../policies/rollout.hcl")
	if err != nil {
		b.Fatal(err)
	}
	for _, in := range []struct {
		name string
		src  []byte
	}{{"rollout.hcl", policy}, {"256KiB-of-brackets", []byte(strings.Repeat("[", facts.MaxFileBytes))}} {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.src)))
			for b.Loop() {
				Source("f.hcl", in.src)
			}
		})
	}
}
