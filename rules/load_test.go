package rules

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// okRule is a sound rule other cases build on.
const okRule = `rule "resolve" {
  doc       = "Effective count is the user's intent."
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`

func load(t *testing.T, files map[string]string) (*RuleSet, hcl.Diagnostics) {
	t.Helper()
	m := map[string][]byte{}
	for n, s := range files {
		m[n] = []byte(s)
	}
	return LoadFiles(m)
}

// TestLoadErrors checks that each load-time problem is reported with its
// summary at the exact file:line:col of the offending token.
func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name    string
		src     string
		summary string
		at      string // file:line:col of the subject's start
		detail  string // a phrase the detail must contain
	}{
		{"hcl syntax", `rule "x" {
  doc = "d"
  match {
    n = "intent/user/service/{name}/instances"
`, "Unclosed configuration block", "r.hcl:3:9", "no closing brace"},
		{"cel syntax", `rule "x" {
  doc       = "d"
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  when = "n >> 2"
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "CEL syntax error", "r.hcl:7:14", "Syntax error"},
		{"cel type: an int fact is an int", `rule "x" {
  doc       = "d"
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  when = "n > 'x'"
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "CEL type error", "r.hcl:7:13", "'(int, string)'"},
		{"cel error on a later line of a heredoc", `rule "x" {
  doc       = "d"
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  when = <<EOT
n > 1 &&
  name.size() > bogus
EOT
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "CEL type error", "r.hcl:9:17", "undeclared reference to 'bogus'"},
		{"head value of the wrong type", `rule "x" {
  doc       = "d"
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "'three'"
  }
}
`, "CEL type error", "r.hcl:8:13", "has type string; expected a CEL expression giving an integer"},
		{"unknown key form", `rule "x" {
  doc       = "d"
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instance"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "Unknown key form", "r.hcl:5:37", `Did you mean "intent/{layer}/service/{name}/instances"?`},
		{"unbound variable in a head", `rule "x" {
  doc       = "d"
  principal = "network"
  match {
    ip = "observed/instance/{id}/ip"
  }
  derive "endpoint/service/{svc}/{id}" {
    value = "{'ip': ip, 'port': 80}"
  }
}
`, "Unbound variable in head", "r.hcl:7:28", "{svc}"},
		{"missing doc", `rule "x" {
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "Missing doc", "r.hcl:1:1", "doc"},
		{"principal may not write the tree", `rule "x" {
  doc       = "d"
  principal = "network"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "Principal may not write here", "r.hcl:7:10", `may write "endpoint/"`},
		{"unknown principal", strings.Replace(okRule, `"intent-resolver"`, `"intent-resolve"`, 1),
			"Unknown principal", "r.hcl:3:15", `Did you mean "intent-resolver"?`},
		{"two writers without an order", okRule + strings.Replace(okRule, `"resolve"`, `"resolve2"`, 1),
			"Two rules write the same key form", "r.hcl:17:10", `after = ["resolve"]`},
		{"unknown rule in after", strings.Replace(okRule, `principal = "intent-resolver"`, "principal = \"intent-resolver\"\n  after = [\"resolv\"]", 1),
			"Unknown rule", "r.hcl:4:12", `Did you mean "resolve"?`},
		{"a cycle of after", strings.Replace(okRule, `principal = "intent-resolver"`, "principal = \"intent-resolver\"\n  after = [\"resolve2\"]", 1) +
			strings.Replace(strings.Replace(okRule, `"resolve"`, `"resolve2"`, 1), `principal = "intent-resolver"`, "principal = \"intent-resolver\"\n  after = [\"resolve\"]", 1),
			"Cycle in after", "r.hcl:4:12", `Rule "resolve" is ordered after itself`},
		// An action may read a view that depends on its output, not one
		// that depends on its absence: reported at the action's read.
		{"cycle through negation and a view", `rule "a" {
  doc       = "d"
  principal = "admin"
  match {
    n = "intent/user/service/{name}/instances"
  }
  optional {
    p = "intent/policy/service/{name}/instances"
  }
  emit "intent/autoscaler/service/{name}/instances" {
    value = "p.orValue(n)"
  }
}
rule "b" {
  doc       = "d"
  principal = "admin"
  match {
    n = "intent/user/service/{name}/instances"
  }
  absent = ["intent/autoscaler/service/{name}/instances"]
  derive "intent/policy/service/{name}/instances" {
    value = "n"
  }
}
`, "Cycle through negation", "r.hcl:8:9", "Rules b, a form a cycle through negation"},
		{"a view negating itself", `rule "a" {
  doc       = "d"
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  absent = ["effective/service/{name}/instances"]
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "Cycle through negation", "r.hcl:7:13", "\"a\" tests the absence of \"effective/service/{name}/instances\", which \"a\" writes"},
		{"join of a segment with an int", `rule "x" {
  doc       = "d"
  principal = "admin"
  match {
    n = "intent/user/service/{name}/instances"
    m = "desired/service/{n}/image"
  }
  emit "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "Join type mismatch", "r.hcl:6:9", "only string values"},
		{"mixed heads", `rule "x" {
  doc       = "d"
  principal = "admin"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
  delete "intent/user/service/{name}/instances" {}
}
`, "Mixed heads", "r.hcl:1:1", "Split it"},
		{"a fresh id no head uses", `rule "x" {
  doc       = "d"
  principal = "instances"
  match {
    n = "desired/service/{name}/instances"
  }
  fresh "id" {}
  emit "observed/instance/a0001/state" {
    value = "'pending'"
  }
}
`, "Unused fresh id", "r.hcl:7:3", "no head uses it"},
		{"optional pattern with an unbound variable", `rule "x" {
  doc       = "d"
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  optional {
    c = "desired/service/{other}/resources/cpu"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, "Unbound variable", "r.hcl:8:9", "{other}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, diags := load(t, map[string]string{"r.hcl": c.src})
			if rs != nil || !diags.HasErrors() {
				t.Fatalf("loaded; want %q", c.summary)
			}
			var found []string
			for _, d := range diags {
				at := ""
				if d.Subject != nil {
					at = fmt.Sprintf("%s:%d:%d", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
				}
				found = append(found, fmt.Sprintf("%s at %s: %s", d.Summary, at, d.Detail))
				if d.Summary == c.summary && at == c.at && strings.Contains(d.Detail, c.detail) {
					return
				}
			}
			t.Errorf("want %q at %s containing %q; got:\n%s", c.summary, c.at, c.detail, strings.Join(found, "\n"))
		})
	}
}

// TestOnePass checks that problems in several rules and files come back
// together, in file order.
func TestOnePass(t *testing.T) {
	bad := `rule "x" {
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instancez"
  }
  when = "n > 'x'"
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`
	_, diags := load(t, map[string]string{"a.hcl": bad, "b.hcl": strings.ReplaceAll(bad, `"x"`, `"y"`)})
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%s:%d %s", d.Subject.Filename, d.Subject.Start.Line, d.Summary))
	}
	want := []string{"a.hcl:1 Missing doc", "a.hcl:4 Unknown key form", "b.hcl:1 Missing doc", "b.hcl:4 Unknown key form",
		"b.hcl:7 Two rules write the same key form"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOrderAndVersion(t *testing.T) {
	writer := okRule
	reader := `rule "a_reader" {
  doc       = "Reads the effective count (sorts before resolve by name, runs after it by dependency)."
  principal = "instances"
  match {
    want = "effective/service/{name}/instances"
  }
  fresh "id" {
    count = "want"
  }
  emit "observed/instance/{id}/service" {
    value = "name"
  }
}
`
	rs, diags := load(t, map[string]string{"w.hcl": writer, "r.hcl": reader})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if rs.Rules[0].Name != "resolve" || rs.Rules[1].Name != "a_reader" {
		t.Errorf("order %s, %s: want resolve before a_reader", rs.Rules[0].Name, rs.Rules[1].Name)
	}
	rs2, _ := load(t, map[string]string{"w.hcl": writer, "r.hcl": reader})
	if rs.Version != rs2.Version || len(rs.Version) != 12 {
		t.Errorf("versions %q, %q: want equal, 12 hex", rs.Version, rs2.Version)
	}
	rs3, _ := load(t, map[string]string{"w.hcl": writer, "r.hcl": reader + "\n"})
	if rs3.Version == rs.Version {
		t.Errorf("a changed file kept version %s", rs.Version)
	}
}

// TestProgramCache checks that a reload reuses compiled programs.
func TestProgramCache(t *testing.T) {
	pc, err := NewProgramCache(100)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"r.hcl": []byte(okRule)}
	if _, d := LoadFiles(files, WithCache(pc)); d.HasErrors() {
		t.Fatal(d)
	}
	_, c1 := pc.Stats()
	if _, d := LoadFiles(files, WithCache(pc)); d.HasErrors() {
		t.Fatal(d)
	}
	h2, c2 := pc.Stats()
	if c1 == 0 || c2 != c1 || h2 == 0 {
		t.Errorf("compiles %d then %d, hits %d: want the reload served from the cache", c1, c2, h2)
	}
	// A different cost limit is another program.
	if _, d := LoadFiles(files, WithCache(pc), WithCostLimit(10)); d.HasErrors() {
		t.Fatal(d)
	}
	if _, c3 := pc.Stats(); c3 == c2 {
		t.Errorf("a different cost limit reused the program")
	}
}

// TestDocsPrincipals keeps the principal table of docs/rules.md in step
// with rules.Principals.
func TestDocsPrincipals(t *testing.T) {
	doc, err := os.ReadFile("../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, prefixes := range Principals {
		cells := make([]string, len(prefixes))
		for i, p := range prefixes {
			cells[i] = "`" + p + "`"
		}
		row := fmt.Sprintf("| `%s`", name)
		text := strings.Join(cells, ", ")
		if name == "admin" {
			text = "everything"
		}
		found := false
		for _, line := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(line, row) && strings.Contains(line, "| "+text+" |") {
				found = true
			}
		}
		if !found {
			t.Errorf("docs/rules.md has no row %s ... | %s |", row, text)
		}
	}
}
