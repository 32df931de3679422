package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// goBinary is the go command of the toolchain running the tests.
func goBinary() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestManPagesUpToDate generates the man pages with the real binary, as
// `go generate ./cmd/ccattler` does, and compares them with docs/man: a
// command, flag or help text changed without regenerating them fails here.
// Only the .TH line differs from one day to the next (it carries the date).
func TestManPagesUpToDate(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(bin, "gen-man", dir)
	// The flags' defaults come from the environment (CCATTLER_ETCD, ...):
	// the pages must not.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "CCATTLER_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen-man: %v\n%s", err, out)
	}
	got, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	want, _ := filepath.Glob(filepath.Join("..", "..", "docs", "man", "*.1"))
	base := func(ps []string) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = filepath.Base(p)
		}
		return out
	}
	if !slices.Equal(base(got), base(want)) {
		t.Fatalf("docs/man has %v,\ngenerated %v: run go generate ./cmd/ccattler", base(want), base(got))
	}
	if !slices.Contains(base(got), "ccattler-describe.1") || slices.Contains(base(got), "ccattler-gen-man.1") {
		t.Errorf("the pages are not those of the commands: %v", base(got))
	}
	body := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(l, ".TH ") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	for i := range got {
		if body(got[i]) != body(want[i]) {
			t.Errorf("docs/man/%s is stale: run go generate ./cmd/ccattler", filepath.Base(got[i]))
		}
	}
}
