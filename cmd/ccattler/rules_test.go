package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestRulesCommands(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		code   int
		stdout []string // regexps
		stderr []string
	}{
		{"check a sound set", []string{"rules", "check", "../../engine/testdata/lifecycle"}, 0,
			[]string{`^\.\./\.\./engine/testdata/lifecycle: 5 rules in 1 files, version [0-9a-f]{12}\n$`}, nil},
		{"check a rejected set: every problem with position and caret", []string{"rules", "check", "../../rules/testdata/errors/principal"}, 1, nil,
			[]string{`endpoints\.hcl:5:34: error: Unknown key form\n`, `Did you mean "observed/instance/\{instance-id\}/ip"\?`,
				`endpoints\.hcl:8:10: error: Principal may not write here\n   8 \|   derive "endpoint/service/\{s\}/\{id\}" \{\n     \|          \^{27}\n`,
				`error: rule set .* rejected: 2 errors`}},
		{"check -o json", []string{"rules", "check", "../../engine/testdata/lifecycle", "-o", "json"}, 0,
			[]string{`"rules": 5`, `"files": 1`, `"version": "[0-9a-f]{12}"`}, nil},
		{"test -o json", []string{"rules", "test", "../../engine/eval/testdata/choice", "-o", "json", "--run", "capacity"}, 0,
			[]string{`"test": "capacity consumed earlier in the same round is respected"`, `"passed": true`, `"schedule": 8`}, nil},
		{"check a missing directory", []string{"rules", "check", "no/such/dir"}, 1, nil, []string{`Cannot read rule directory`}},
		{"test a set whose tests pass", []string{"rules", "test", "../../engine/testdata/lifecycle"}, 0,
			[]string{`ok   service lifecycle and node failure`, `1 tests, 0 failed`}, nil},
		{"check with no directory is a usage error", []string{"rules", "check"}, 2, nil,
			[]string{`ccattler rules check: expected ccattler rules check DIR, e.g. ccattler rules check policies/\n`, `Run 'ccattler rules check --help' for usage`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, c.args...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, c.code, r.stdout, r.stderr)
			}
			for _, re := range c.stdout {
				if !regexp.MustCompile(re).MatchString(r.stdout) {
					t.Errorf("stdout does not match %q:\n%s", re, r.stdout)
				}
			}
			for _, re := range c.stderr {
				if !regexp.MustCompile(re).MatchString(r.stderr) {
					t.Errorf("stderr does not match %q:\n%s", re, r.stderr)
				}
			}
		})
	}
}

// TestRulesTestFailure: a failing rule test prints the expected/actual
// difference and exits 1.
func TestRulesTestFailure(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../engine/eval/testdata/join/endpoints.hcl")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "endpoints.hcl", string(src))
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "tests"), "wrong.hcl", `test "wrong port" {
  facts = {
    "desired/service/web/expose/9090" = {}
    "observed/instance/a8f31/service" = "web"
    "observed/instance/a8f31/state"   = "running"
    "observed/instance/a8f31/ip"      = "10.1.0.5"
    "observed/instance/a8f31/health"  = "healthy"
  }
  expect {
    writes  = { "endpoint/service/web/a8f31" = { ip = "10.1.0.5", port = 8080 } }
    firings = { publish_endpoint = 2 }
  }
}
`)
	r := run(t, "rules", "test", dir)
	if r.code != 1 {
		t.Errorf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"FAIL wrong port",
		`~ endpoint/service/web/a8f31: expected {"ip": "10.1.0.5", "port": 8080}, got {"ip": "10.1.0.5", "port": 9090}`,
		"publish_endpoint: expected 2, got 1",
		"1 tests, 1 failed",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}
