package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{"b.hcl": "volume \"b\" {}\n", "a.hcl": "service \"a\" {}\n", "notes.txt": "not HCL"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty := t.TempDir()
	one := filepath.Join(dir, "b.hcl")
	cases := []struct {
		name    string
		paths   []string
		want    []string // source names, in order
		wantErr string
	}{
		{"a directory is its *.hcl files in name order", []string{dir}, []string{filepath.Join(dir, "a.hcl"), one}, ""},
		{"files in the order given", []string{one, filepath.Join(dir, "a.hcl")}, []string{one, filepath.Join(dir, "a.hcl")}, ""},
		{"a missing file is named", []string{filepath.Join(dir, "nope.hcl")}, nil, "read " + filepath.Join(dir, "nope.hcl") + ": "},
		{"an empty directory is an error", []string{empty}, nil, "read " + empty + ": the directory holds no *.hcl files"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srcs, err := ReadFiles(tc.paths)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want prefix %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range srcs {
				names = append(names, s.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("read %v, want %v", names, tc.want)
			}
		})
	}
}
