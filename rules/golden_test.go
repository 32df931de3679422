package rules

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/errors/*/want.txt")

// TestGoldenDiagnostics loads each testdata/errors/<case>/ and compares the
// printed diagnostics (file:line:col, source line, caret) with want.txt.
func TestGoldenDiagnostics(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/errors/*")
	if len(dirs) == 0 {
		t.Fatal("no cases")
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rs, files, diags := LoadWithFiles(dir)
			if rs != nil || !diags.HasErrors() {
				t.Fatal("loaded without errors")
			}
			var got bytes.Buffer
			if err := WriteDiagnostics(&got, files, diags); err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(dir, "want.txt")
			if *update {
				if err := os.WriteFile(want, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			w, err := os.ReadFile(want)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got.Bytes(), w) {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", got.Bytes(), w)
			}
		})
	}
}
