package rules

import (
	"fmt"
	"strings"
	"testing"

	"cel.dev/cel-go/cel"
	"github.com/hashicorp/hcl/v2"
)

// actionDefs define the action the cases below take, next to the shared
// definitions of shared_test.go.
const actionDefs = `
action "create_pending" {
  doc    = "count new pending instances of svc."
  params = ["count"]
  fresh "id" { count = "count" }
  emit "observed/instance/{id}/service" { value = "svc" }
  emit "observed/instance/{id}/state" { value = "'pending'" }
}
`

// actionRule is a rule creating the instances svc misses, by the action
// or, written out, with the heads in it.
func actionRule(name string, written bool, count string) string {
	heads := `  do "create_pending" { count = "` + count + `" }
`
	if written {
		heads = `  fresh "id" { count = "` + count + `" }
  emit "observed/instance/{id}/service" { value = "svc" }
  emit "observed/instance/{id}/state" { value = "'pending'" }
`
	}
	return `rule "` + name + `" {
  doc       = "d"
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  when = "want > running"
` + heads + `}
`
}

func loadAction(t *testing.T, rules string) (*RuleSet, hcl.Diagnostics) {
	t.Helper()
	return load(t, map[string]string{"defs.hcl": sharedDefs + actionDefs, "r.hcl": rules})
}

// TestActionIsTheRuleWrittenOut checks that a rule taking an action
// compiles to the rule with the action's heads written in it: the same
// heads, the same fresh id, each expression checked to the same CEL, with
// the param inlined; and that a shared count read only by the param is
// placed in the rule's scope.
func TestActionIsTheRuleWrittenOut(t *testing.T) {
	count := "want - running - pending"
	written := strings.Replace(actionRule("written", true, count), `principal = "instances"`, `principal = "instances"
  after     = ["taken"]`, 1)
	rs, diags := loadAction(t, actionRule("taken", false, count)+written)
	if rs == nil {
		t.Fatal(diags.Error())
	}
	taken, _ := rs.Rule("taken")
	w, _ := rs.Rule("written")
	src := func(e *Expr) string {
		s, err := cel.AstToString(e.AST)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if taken.Fresh == nil || taken.Fresh.Var != "id" || src(taken.Fresh.Count) != src(w.Fresh.Count) {
		t.Fatalf("fresh: got %+v, want the written rule's %s", taken.Fresh, src(w.Fresh.Count))
	}
	if len(taken.Heads) != 2 || len(w.Heads) != 2 {
		t.Fatalf("heads: %d and %d, want 2", len(taken.Heads), len(w.Heads))
	}
	for i, h := range taken.Heads {
		wh := w.Heads[i]
		if h.Kind != wh.Kind || h.Template != wh.Template || src(h.Value) != src(wh.Value) {
			t.Errorf("head %d: %v %s = %s, want %v %s = %s", i, h.Kind, h.Template, src(h.Value), wh.Kind, wh.Template, src(wh.Value))
		}
	}
	names := func(r *Rule) string {
		var out []string
		for _, ag := range r.Body.Aggregates {
			out = append(out, ag.Name)
		}
		return strings.Join(out, " ")
	}
	if names(taken) != "pending running" || names(taken) != names(w) {
		t.Errorf("aggregates in scope: %q, want %q", names(taken), names(w))
	}
	for _, d := range diags {
		if d.Summary == "Unused definition" && strings.Contains(d.Detail, "create_pending") {
			t.Errorf("a taken action is reported unused: %s", d.Detail)
		}
	}
}

// TestActionParamShadows checks a param wins over a rule's name of the
// same name inside the action: the action sees what the do block gives.
func TestActionParamShadows(t *testing.T) {
	rule := strings.Replace(actionRule("x", false, "want - running"), `match { want = "effective/service/{svc}/instances" }`, `match {
    want  = "effective/service/{svc}/instances"
    count = "intent/user/service/{svc}/instances"
  }`, 1)
	rs, diags := loadAction(t, rule)
	if rs == nil {
		t.Fatal(diags.Error())
	}
	x, _ := rs.Rule("x")
	got, err := cel.AstToString(x.Fresh.Count.AST)
	if err != nil {
		t.Fatal(err)
	}
	if got != "want - running" {
		t.Errorf("fresh count is %s, want the param's want - running", got)
	}
}

// TestActionErrors checks each mistake in taking an action is reported at
// its place, with what to do.
func TestActionErrors(t *testing.T) {
	cases := []struct {
		name, defs, rules, summary, at, detail string
	}{
		{"misspelt action", "", strings.Replace(actionRule("x", false, "1"), `do "create_pending"`, `do "create_pendin"`, 1),
			"Unknown action", "r.hcl:6:6", `Did you mean "create_pending"?`},
		{"misspelt param", "", strings.Replace(actionRule("x", false, "1"), `{ count =`, `{ cuont =`, 1),
			"Unknown param", "r.hcl:6:25", "Did you mean count?"},
		{"missing param", "", strings.Replace(actionRule("x", false, "1"), `{ count = "1" }`, `{}`, 1),
			"Missing param", "r.hcl:6:3", `give it in the do block, as count = "expr"`},
		{"param of the wrong type", "", actionRule("x", false, "'three'"),
			"CEL type error", "defs.hcl:33:24", `In action create_pending, taken by rule "x"`},
		{"head that does not fit the rule", "", strings.Replace(actionRule("x", false, "1"), `effective/service/{svc}/instances`, `effective/service/{name}/instances`, 1),
			"CEL type error", "defs.hcl:34:52", "undeclared reference to 'svc'"},
		{"param that does not compile", "", actionRule("x", false, "wnat"),
			"CEL type error", "r.hcl:6:34", "Did you mean want?"},
		{"two fresh ids", "", strings.Replace(actionRule("x", false, "1"), `  do "create_pending"`, `  fresh "n" {}
  emit "observed/instance/{n}/state" { value = "'pending'" }
  do "create_pending"`, 1),
			"Duplicate fresh", "r.hcl:8:3", `rule "x" draws {n} already`},
		{"name defined twice", `let {
  create_pending = "1"
}
`, actionRule("x", false, "1"), "Duplicate definition", "defs.hcl:30:8", "already defined as a shared let at d2.hcl:2"},
		{"action in a summary", "", strings.Replace(actionRule("x", false, "1"), `rule "x"`, `summary "x"`, 1),
			"Action in a summary", "r.hcl:6:3", `takes action "create_pending"`},
		{"action writing nothing", `action "nothing" {
  params = []
}
`, actionRule("x", false, "1"), "Action writes nothing", "d2.hcl:1:1", "no emit or delete head"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"defs.hcl": sharedDefs + actionDefs, "r.hcl": tc.rules}
			if tc.defs != "" {
				files["d2.hcl"] = tc.defs
			}
			rs, diags := load(t, files)
			if rs != nil {
				t.Fatal("loaded")
			}
			wantDiag(t, diags, tc.summary, tc.at, tc.detail)
		})
	}
}

// TestActionUnusedWarns checks an action no rule takes is a warning: the
// set loads.
func TestActionUnusedWarns(t *testing.T) {
	rs, diags := load(t, map[string]string{"defs.hcl": sharedDefs + actionDefs, "r.hcl": sharedRule("x", "running > 0 && pending > 0 && instances > 0 && double(missing) > share")})
	if rs == nil {
		t.Fatal(diags.Error())
	}
	var got []string
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && d.Summary == "Unused definition" {
			got = append(got, fmt.Sprintf("%s:%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Detail))
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "defs.hcl:30: Action create_pending is taken by no rule") {
		t.Errorf("unused warnings: %q, want one for create_pending", got)
	}
}

// TestCountsWithOwnPatterns checks a counts block's own match joins the
// patterns of the relations it is over, as written in a relation would.
func TestCountsWithOwnPatterns(t *testing.T) {
	own := `counts {
  params = ["svc"]
  over   = "instance"
  match { node = "placement/instance/{i}" }
  placed = "state == 'running'"
}
`
	rel := `relation "placed_instance" {
  over  = "instance"
  match { node = "placement/instance/{i}" }
}
counts {
  params = ["svc"]
  over   = "placed_instance"
  placed = "state == 'running'"
}
`
	patterns := func(defs string) string {
		rs, diags := load(t, map[string]string{"defs.hcl": sharedDefs + defs, "r.hcl": sharedRule("x", "placed > 0 && running > 0 && pending > 0 && instances > 0 && double(missing) > share")})
		if rs == nil {
			t.Fatal(diags.Error())
		}
		x, _ := rs.Rule("x")
		for _, ag := range x.Body.Aggregates {
			if ag.Name == "placed" {
				var out []string
				for _, p := range ag.Body.Match {
					out = append(out, p.Template)
				}
				return strings.Join(out, " ")
			}
		}
		t.Fatal("placed is not in the rule's scope")
		return ""
	}
	got, want := patterns(own), patterns(rel)
	if !strings.Contains(got, "placement/instance/{i}") || !strings.Contains(got, "observed/instance/{i}/state") || len(got) != len(want) {
		t.Errorf("counts with its own match: %s; over a relation: %s", got, want)
	}
	_, diags := load(t, map[string]string{"defs.hcl": sharedDefs + strings.Replace(own, "match {", "choose \"c\" {", 1), "r.hcl": sharedRule("x", "placed > 0")})
	for _, d := range diags {
		if d.Summary == "Unexpected block" && strings.Contains(d.Detail, `"choose" belongs elsewhere`) && d.Subject.Start.Line == 32 {
			return
		}
	}
	t.Errorf("a choose block in counts is not refused at it: %s", diags)
}
