package ruletest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/hashicorp/hcl/v2"
)

const worldsSrc = `world "node" {
  params = ["id"]
  facts = {
    "observed/node/${id}/state" = "alive"
    "lease/node/${id}"          = {}
  }
}
world "web" {
  facts = {
    "desired/service/web"       = {}
    "desired/service/web/image" = "nginx:1"
  }
}
world "web2" {
  facts = { "desired/service/web/image" = "nginx:2" }
}
`

// puts renders a step's facts as key=value@lease, in their order.
func puts(s *Step) string {
	var out []string
	for _, f := range s.Puts {
		v := f.Key + "=" + string(f.Value)
		if f.Lease != 0 {
			v += "@lease"
		}
		out = append(out, v)
	}
	return strings.Join(out, " ")
}

// A test's worlds come first, in their order, its own facts after them;
// a key the test sets itself is the test's, a leased world fact keeps its
// lease unless the test lists it in unleased; a step includes worlds too.
func TestWorldsExpand(t *testing.T) {
	src := worldsSrc + `test "x" {
  worlds   = [node("node-1"), "web"]
  facts    = { "desired/service/web/image" = "nginx:3" }
  unleased = ["lease/node/node-1"]
  then "a second node" {
    worlds = [node("node-2")]
  }
}
`
	tests, _, diags := ParseFile("f_test.hcl", []byte(src), facts.Default)
	if diags.HasErrors() || len(diags) != 1 || !strings.Contains(diags[0].Summary, "Unused world") || !strings.Contains(diags[0].Detail, `"web2"`) {
		t.Fatalf("diagnostics %v, want only a warning that web2 is unused", diags)
	}
	if diags[0].Severity != hcl.DiagWarning || diags[0].Subject.String() != "f_test.hcl:14,1-13" {
		t.Errorf("unused world: %v at %v, want a warning at f_test.hcl:14,1-13", diags[0].Severity, diags[0].Subject)
	}
	want := `observed/node/node-1/state="alive" lease/node/node-1={} desired/service/web={} desired/service/web/image="nginx:3"`
	if got := puts(tests[0].Steps[0]); got != want {
		t.Errorf("first step:\n got %s\nwant %s", got, want)
	}
	want = `observed/node/node-2/state="alive" lease/node/node-2={}@lease`
	if got := puts(tests[0].Steps[1]); got != want {
		t.Errorf("then step:\n got %s\nwant %s", got, want)
	}
}

// A world includes others as a test does, passing its params on; its own
// facts win over theirs.
func TestWorldsInWorlds(t *testing.T) {
	src := worldsSrc + `world "web_on" {
  params = ["node", "image"]
  worlds = ["web", node(node)]
  facts  = {
    "desired/service/web/image"  = image
    "observed/node/${node}/zone" = "a"
  }
}
test "x" {
  worlds = [web_on("n1", "nginx:9")]
}
`
	tests, _, diags := ParseFile("f_test.hcl", []byte(src), facts.Default)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := `desired/service/web={} observed/node/n1/state="alive" lease/node/n1={}@lease desired/service/web/image="nginx:9" observed/node/n1/zone="a"`
	if got := puts(tests[0].Steps[0]); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

// Mistakes in worlds are errors at the element or block they are about.
func TestWorldsErrors(t *testing.T) {
	for _, c := range []struct {
		name, test string
		at, says   string
	}{
		{"unknown, with a suggestion", `test "x" { worlds = ["wbe"] }`, "f_test.hcl:18,22-27", `No world "wbe" is defined in this directory's test files. Did you mean "web"?`},
		{"unknown, nothing near", `test "x" { worlds = ["database"] }`, "f_test.hcl:18,22-32", `No world "database" is defined`},
		{"two worlds disagree", `test "x" { worlds = ["web", "web2"] }`, "f_test.hcl:18,29-35",
			`desired/service/web/image is "nginx:1" in world "web" and "nginx:2" in world "web2"; set it in the test itself`},
		{"too few arguments", `test "x" { worlds = [node()] }`, "f_test.hcl:18,22-28", `World "node" takes 1 argument(s), id; 0 given.`},
		{"arguments to a world without params", `test "x" { worlds = [web("a")] }`, "f_test.hcl:18,22-30", `World "web" takes no arguments`},
		{"a world's params called by name", `test "x" { worlds = ["node"] }`, "f_test.hcl:18,22-28", `World "node" takes 1 argument(s)`},
		{"included twice", `test "x" { worlds = ["web", "web"] }`, "f_test.hcl:18,29-34", `World "web" is named twice`},
		{"not a list", `test "x" { worlds = "web" }`, "f_test.hcl:18,21-26", `worlds is a list`},
		{"a number", `test "x" { worlds = [1] }`, "f_test.hcl:18,22-23", `An element of worlds is a world's name`},
		{"a step's unknown world", `test "x" {
  then "y" { worlds = [nod("n")] }
}`, "f_test.hcl:19,24-32", `No world "nod" is defined in this directory's test files. Did you mean "node"?`},
		{"defined twice", `world "web" { }`, "f_test.hcl:18,1-12", `World "web" is already defined at f_test.hcl:8,1-12`},
		{"a param that is not a name", `world "bad" { params = ["a b"] }`, "f_test.hcl:18,24-31", `"a b": a param is a name`},
		{"a world reading an unknown variable", `world "bad" {
  params = ["id"]
  facts  = { "observed/node/${idd}/state" = "alive" }
}
test "x" { worlds = [bad("n")] }`, "f_test.hcl:20,31-34", `There is no variable named "idd". Did you mean "id"?`},
		{"a world that includes itself", `world "a" { worlds = ["b"] }
world "b" { worlds = ["a"] }
test "x" { worlds = ["a"] }`, "f_test.hcl:19,23-26", `World "a" includes itself: a → b → a.`},
	} {
		src := worldsSrc + "\n" + c.test + "\n"
		_, _, diags := ParseFile("f_test.hcl", []byte(src), facts.Default)
		found := false
		for _, d := range diags {
			if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.String() == c.at && strings.Contains(d.Summary+": "+d.Detail, c.says) {
				found = true
			}
		}
		if !found {
			var all []string
			for _, d := range diags {
				all = append(all, d.Error())
			}
			t.Errorf("%s: diagnostics\n%s\nwant an error at %s saying %q", c.name, strings.Join(all, "\n"), c.at, c.says)
		}
	}
}

// The worlds of a directory's test files are shared by all of them, and
// only by them: a test in another directory cannot name them.
func TestWorldsShareADirectory(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	write := func(p, src string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(a, "worlds.hcl"), worldsSrc)
	write(filepath.Join(a, "web.hcl"), "test \"in a\" {\n  worlds = [\"web\", \"web2\"]\n  facts = { \"desired/service/web/image\" = \"nginx:3\" }\n}\n")
	write(filepath.Join(a, "node.hcl"), `test "in a too" { worlds = [node("n1")] }`)
	write(filepath.Join(b, "web.hcl"), `test "in b" { worlds = ["web"] }`)
	tests, _, diags := Parse([]string{filepath.Join(a, "node.hcl"), filepath.Join(a, "web.hcl"), filepath.Join(a, "worlds.hcl"), filepath.Join(b, "web.hcl")}, facts.Default)
	if len(tests) != 3 {
		t.Fatalf("%d tests, want 3", len(tests))
	}
	var errs []string
	for _, d := range diags {
		errs = append(errs, d.Error())
	}
	if len(diags) != 1 || !strings.Contains(diags[0].Error(), filepath.Join(b, "web.hcl")) || !strings.Contains(diags[0].Detail, `No world "web"`) {
		t.Errorf("diagnostics %v, want one: b's test names a world of a", errs)
	}
	if got := puts(tests[1].Steps[0]); !strings.Contains(got, `image="nginx:3"`) {
		t.Errorf("a's test: %s, want its own image", got)
	}
}

// Worlds that include others twice each, with params, would expand
// exponentially (2^40 facts here): the expansion stops at MaxWorldFacts
// with an error at the world.
func TestWorldsExpansionBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("world \"w0\" {\n  params = [\"x\"]\n  facts = { \"observed/node/${x}/state\" = \"alive\" }\n}\n")
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&b, "world \"w%d\" {\n  params = [\"x\"]\n  worlds = [w%d(\"${x}a\"), w%d(\"${x}b\")]\n}\n", i, i-1, i-1)
	}
	b.WriteString("test \"x\" { worlds = [w40(\"n\")] }\n")
	_, _, diags := ParseFile("f_test.hcl", []byte(b.String()), facts.Default)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "World too large") {
		t.Errorf("diagnostics %v, want World too large", diags)
	}
}
