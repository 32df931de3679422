package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRulesTestWorlds: `rules test` runs tests that include worlds from
// another file of their directory; an unused world is a warning with its
// position and the tests still pass; a misspelt world rejects the tests
// with "did you mean" at the name.
func TestRulesTestWorlds(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("../../engine/eval/testdata/join/endpoints.hcl")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "endpoints.hcl", string(src))
	tests := filepath.Join(dir, "tests")
	if err := os.Mkdir(tests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, tests, "worlds.hcl", `world "web" {
  facts = { "desired/service/web/expose/8080" = {} }
}

world "healthy" {
  params = ["id", "ip"]
  facts = {
    "observed/instance/${id}/service" = "web"
    "observed/instance/${id}/state"   = "running"
    "observed/instance/${id}/ip"      = ip
    "observed/instance/${id}/health"  = "healthy"
  }
}

world "spare" {
  facts = { "desired/service/spare/expose/80" = {} }
}
`)
	test := `test "an endpoint per healthy instance" {
  worlds = ["web", healthy("a8f31", "10.1.0.5"), healthy("b72c9", "10.1.0.6")]
  expect {
    writes = {
      "endpoint/service/web/a8f31" = { ip = "10.1.0.5", port = 8080 }
      "endpoint/service/web/b72c9" = { ip = "10.1.0.6", port = 8080 }
    }
    firings = { publish_endpoint = 2 }
  }
}
`
	writeFile(t, tests, "endpoints.hcl", test)
	r := run(t, "rules", "test", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "ok   an endpoint per healthy instance") || !strings.Contains(r.stdout, "1 tests, 0 failed") {
		t.Errorf("exit %d, want 0 and the test passed\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "worlds.hcl:15:1: warning: Unused world") || !strings.Contains(r.stderr, `No test or step includes world "spare".`) {
		t.Errorf("stderr lacks the unused world's warning at its position:\n%s", r.stderr)
	}

	writeFile(t, tests, "endpoints.hcl", strings.Replace(test, `"web", healthy(`, `"wbe", healthy(`, 1))
	r = run(t, "rules", "test", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "endpoints.hcl:2:13: error: Unknown world") || !strings.Contains(r.stderr, `Did you mean "web"?`) {
		t.Errorf("exit %d, want 1 with the unknown world at its position\n%s%s", r.code, r.stdout, r.stderr)
	}
}
