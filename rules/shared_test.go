package rules

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// sharedDefs are shared definitions the cases below read: a relation, a
// counts block, an aggregate, a let and a const.
const sharedDefs = `
relation "instance" {
  match {
    svc   = "observed/instance/{i}/service"
    state = "observed/instance/{i}/state"
  }
}

counts {
  params  = ["svc"]
  over    = "instance"
  running = "state == 'running'"
  pending = "state == 'pending'"
}

aggregate "instances" {
  params = ["svc"]
  over   = "instance"
  count  = true
}

let {
  missing = "want - running"
}

const {
  share = 0.55
}
`

// sharedRule returns a rule reading the definitions in when.
func sharedRule(name, when string) string {
	return `rule "` + name + `" {
  doc       = "d"
  principal = "instances"
  match {
    want = "effective/service/{svc}/instances"
  }
  when = "` + when + `"
  emit "observed/service/{svc}/rollout" {
    value = "{'total': want}"
  }
}
`
}

// intHead makes a rule of sharedRule write an int.
func intHead(rule string) string {
	return strings.Replace(strings.Replace(rule, "observed/service/{svc}/rollout", "observed/service/{svc}/restart/failures", 1), "{'total': want}", "want", 1)
}

func loadShared(t *testing.T, rules string) (*RuleSet, hcl.Diagnostics) {
	t.Helper()
	return load(t, map[string]string{"defs.hcl": sharedDefs, "r.hcl": rules})
}

// TestSharedAggregateIsOneForAllRules checks that rules reading a shared
// aggregate get it in their scope, and that those binding its params to the
// same types share one compiled aggregate: the evaluator caches by it.
func TestSharedAggregateIsOneForAllRules(t *testing.T) {
	rs, diags := loadShared(t, sharedRule("a", "missing > 0 && pending == 0 && double(instances) > share")+
		intHead(sharedRule("b", "running > 1")))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, d := range diags {
		t.Errorf("unexpected %s", d.Error())
	}
	a, _ := rs.Rule("a")
	b, _ := rs.Rule("b")
	byName := func(r *Rule) map[string]*Aggregate {
		out := map[string]*Aggregate{}
		for _, ag := range r.Body.Aggregates {
			out[ag.Name] = ag
		}
		return out
	}
	as, bs := byName(a), byName(b)
	for _, n := range []string{"running", "pending", "instances"} {
		if as[n] == nil {
			t.Errorf("rule a lacks shared aggregate %s", n)
		}
	}
	if len(bs) != 1 || bs["running"] == nil {
		t.Fatalf("rule b's aggregates: %v, want running alone", bs)
	}
	if as["running"] != bs["running"] {
		t.Error("rules binding svc alike got two compiled running aggregates; they must share one")
	}
	if got := as["running"].Params; len(got) != 1 || got[0] != "svc" {
		t.Errorf("params %v", got)
	}
	if a.When.Src != "missing > 0 && pending == 0 && double(instances) > share" {
		t.Errorf("the guard's source is %q: inlining must keep what was written", a.When.Src)
	}
}

// TestSharedAggregateOwnNames checks that a shared aggregate's own names
// are its own: a rule binding state itself does not join with it.
func TestSharedAggregateOwnNames(t *testing.T) {
	rs, diags := loadShared(t, `rule "x" {
  doc       = "d"
  principal = "instances"
  match {
    want  = "effective/service/{svc}/instances"
    state = "observed/instance/{svc}/state"
  }
  when = "running > 0 && state == 'running'"
  emit "observed/service/{svc}/rollout" {
    value = "{'total': want}"
  }
}
`)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r, _ := rs.Rule("x")
	ag := r.Body.Aggregates[0]
	if len(ag.Body.Outer) != 1 || ag.Body.Outer[0] != "svc" {
		t.Errorf("running joins on %v; only its param svc is the rule's", ag.Body.Outer)
	}
}

// TestSharedLocalShadows checks that a rule's own name wins over a shared
// definition of that name.
func TestSharedLocalShadows(t *testing.T) {
	rs, diags := loadShared(t, strings.Replace(sharedRule("x", "running"), "  when", "  let {\n    running = \"want > 2\"\n  }\n  when", 1))
	if diags.HasErrors() {
		t.Fatal(diags.Error()) // the shared running is an int: when = "running" would not type-check
	}
	r, _ := rs.Rule("x")
	if len(r.Body.Aggregates) != 0 {
		t.Errorf("the rule's own let running must shadow the shared count, got aggregates %v", r.Body.Aggregates)
	}
}

// TestSharedErrors checks each problem with a shared definition is
// reported at its place, with what to do.
func TestSharedErrors(t *testing.T) {
	cases := []struct {
		name, rules, summary, at, detail string
	}{
		{"misspelt count", sharedRule("x", "runing > 0"), "CEL type error", "r.hcl:7:11", "Did you mean running?"},
		{"params not bound", strings.Replace(sharedRule("x", "running > 0"), `want = "effective/service/{svc}/instances"`, `want = "effective/service/{name}/instances"`, 1),
			"CEL type error", "r.hcl:7:11", "grouped by svc; svc is not bound here"},
		{"let that does not fit", strings.Replace(sharedRule("x", "missing > 0"), `want = "effective/service/{svc}/instances"`, `want = "desired/service/{svc}/image"`, 1),
			"Shared let does not fit here", "r.hcl:7:11", "Shared let missing"},
		{"unknown relation", `aggregate "y" {
  params = ["svc"]
  over   = "instanse"
  count  = true
}
` + sharedRule("x", "y > 0"), "Unknown relation", "r.hcl:3:12", `Did you mean "instance"?`},
		{"name outside the params", `aggregate "y" {
  params = ["svc"]
  over   = "instance"
  where  = "state == want"
  count  = true
}
` + sharedRule("x", "y > 0"), "CEL type error", "r.hcl:4:22", "add want to its params"},
		{"duplicate definition", `let {
  running = "1"
}
` + sharedRule("x", "running > 0"), "Duplicate definition", "r.hcl:2:3", "already defined as a shared aggregate"},
		{"const that is not a literal", `const {
  c = [1]
}
` + sharedRule("x", "running > 0"), "Invalid const", "r.hcl:2:7", "literal number, string or bool"},
		{"let cycle", `let {
  p = "q + 1"
  q = "p + 1"
}
` + sharedRule("x", "p > 0"), "Let cycle", "r.hcl:11:11", "p -> q -> p"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rs, diags := loadShared(t, tc.rules)
			if rs != nil {
				t.Fatal("loaded")
			}
			wantDiag(t, diags, tc.summary, tc.at, tc.detail)
		})
	}
}

// wantDiag checks the first error with summary is at at (file:line:col)
// and says detail.
func wantDiag(t *testing.T, diags hcl.Diagnostics, summary, at, detail string) {
	t.Helper()
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Summary == summary && d.Subject != nil {
			pos := fmt.Sprintf("%s:%d:%d", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
			if pos != at || !strings.Contains(d.Detail, detail) {
				t.Fatalf("got %s: %s; want %s with %q", pos, d.Detail, at, detail)
			}
			return
		}
	}
	t.Fatalf("no %q diagnostic in:\n%s", summary, diags.Error())
}

// TestSharedUnusedWarns checks an unused definition is a warning, not an
// error: the set loads.
func TestSharedUnusedWarns(t *testing.T) {
	rs, diags := loadShared(t, sharedRule("x", "pending > 0"))
	if rs == nil {
		t.Fatal(diags.Error())
	}
	var unused []string
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning && d.Summary == "Unused definition" {
			unused = append(unused, fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line))
		}
	}
	// running is read by no rule, nor instances, missing (which reads
	// running) or share; relation instance is used by pending.
	want := []string{"defs.hcl:12", "defs.hcl:16", "defs.hcl:23", "defs.hcl:27"}
	sort.Strings(unused)
	sort.Strings(want)
	if strings.Join(unused, " ") != strings.Join(want, " ") {
		t.Errorf("unused warnings at %v, want %v", unused, want)
	}
}

// TestSharedLetGrowthBounded checks lets that each read the next two, 40
// levels deep, are refused at their use instead of inlined: each level
// would double the expression (2^40 copies of the last one). Every let is
// compiled once; without that the load would not end.
func TestSharedLetGrowthBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("let {\n")
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "  l%d = \"l%d + m%d\"\n  m%d = \"l%d - m%d\"\n", i, i+1, i+1, i, i+1, i+1)
	}
	b.WriteString("  l40 = \"1\"\n  m40 = \"2\"\n}\n")
	rs, diags := load(t, map[string]string{"defs.hcl": b.String(), "r.hcl": intHead(sharedRule("x", "l0 > 0"))})
	if rs != nil {
		t.Fatal("loaded")
	}
	for _, d := range diags {
		if d.Summary == "Shared let too large" && d.Subject.Filename == "r.hcl" && strings.Contains(d.Detail, "In shared let") {
			return
		}
	}
	t.Fatalf("no \"Shared let too large\" at the use in:\n%s", diags.Error())
}

// TestSharedAggregateInChoice checks a shared aggregate grouped by a name
// only the choice binds is computed per candidate, in the choice's scope.
func TestSharedAggregateInChoice(t *testing.T) {
	rs, diags := load(t, map[string]string{"r.hcl": `aggregate "on_node" {
  params = ["node"]
  match { node = "placement/instance/{j}" }
  count  = true
}

rule "place" {
  doc       = "d"
  principal = "scheduler"
  match { state = "observed/instance/{id}/state" }
  absent = ["placement/instance/{id}"]
  choose "node" {
    match { nstate = "observed/node/{node}/state" }
    filters { room = "on_node < 3" }
  }
  emit "placement/instance/{id}" { value = "node" }
}
`})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r, _ := rs.Rule("place")
	if len(r.Body.Aggregates) != 0 || len(r.Choose.Body.Aggregates) != 1 || r.Choose.Body.Aggregates[0].Name != "on_node" {
		t.Fatalf("on_node in the body %v and the choice %v; want it in the choice alone", r.Body.Aggregates, r.Choose.Body.Aggregates)
	}
}

// A shared aggregate a choice reads only in its order's keys, bare or
// under asc or desc, is placed in the choice as one its filters read.
func TestSharedAggregateInOrder(t *testing.T) {
	for _, order := range []string{`[desc("on_node")]`, `["on_node"]`, `[asc("state == 'x'"), asc("-on_node")]`} {
		rs, diags := load(t, map[string]string{"r.hcl": `aggregate "on_node" {
  params = ["node"]
  match { node = "placement/instance/{j}" }
  count  = true
}

rule "stop" {
  doc       = "d"
  principal = "reconcile"
  match { state = "observed/instance/{id}/state" }
  choose "victim" {
    match { node = "placement/instance/{v}" }
    order = ` + order + `
  }
  delete "placement/instance/{v}" {}
}
`})
		if diags.HasErrors() {
			t.Fatalf("order = %s: %s", order, diags.Error())
		}
		r, _ := rs.Rule("stop")
		if len(r.Choose.Body.Aggregates) != 1 || r.Choose.Body.Aggregates[0].Name != "on_node" {
			t.Errorf("order = %s: the choice's aggregates %v; want on_node", order, r.Choose.Body.Aggregates)
		}
	}
}

// A rule's body and a choice take a relation's patterns with over, as an
// aggregate does: its match and absent patterns, and the names they bind
// for the shared lets.
func TestSharedRelationInRuleAndChoice(t *testing.T) {
	src := `relation "unplaced" {
  match {
    svc   = "observed/instance/{i}/service"
    state = "observed/instance/{i}/state"
  }
  absent = ["placement/instance/{i}"]
}

let {
  waiting = "state == 'pending'"
}

rule "cancel" {
  doc       = "d"
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  choose "victim" {
    over    = "unplaced"
    filters { pending = "waiting" }
    pick    = "2"
  }
  emit "observed/instance/{i}/state" { value = "'stopped'" }
}

rule "stop" {
  doc       = "d"
  principal = "instances"
  after     = ["cancel"]
  over      = "unplaced"
  when      = "waiting"
  emit "observed/instance/{i}/state" { value = "'stopped'" }
}
`
	rs, diags := load(t, map[string]string{"r.hcl": src})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, sc := range []struct {
		name string
		body *Scope
	}{{"stop", mustRule(t, rs, "stop").Body}, {"cancel's choice", mustRule(t, rs, "cancel").Choose.Body}} {
		if len(sc.body.Match) != 2 || len(sc.body.Absent) != 1 || !slices.Contains(sc.body.Binds, "state") {
			t.Errorf("%s: match %v, absent %v, binds %v; want the relation's two patterns, its absent one, state bound", sc.name, sc.body.Match, sc.body.Absent, sc.body.Binds)
		}
	}
	if ch := mustRule(t, rs, "cancel").Choose; !slices.Equal(ch.Vars, []string{"i"}) {
		t.Errorf("candidate variables %v, want the relation's [i]", ch.Vars)
	}
	_, diags = load(t, map[string]string{"r.hcl": strings.Replace(src, `over      = "unplaced"`, `over      = "unplace"`, 1)})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), `r.hcl:29,15`) || !strings.Contains(diags.Error(), `Did you mean "unplaced"?`) {
		t.Fatalf("a misspelt relation in a rule's over: %v", diags)
	}
}

func mustRule(t *testing.T, rs *RuleSet, name string) *Rule {
	t.Helper()
	r, ok := rs.Rule(name)
	if !ok {
		t.Fatalf("no rule %s", name)
	}
	return r
}

// TestAggregateDropsUnreadOptionals checks that an aggregate keeps only the
// optional patterns its where or of reads, through a shared let too: a
// count of placed instances does not follow their health.
func TestAggregateDropsUnreadOptionals(t *testing.T) {
	src := `relation "spec" {
  match { svc = "observed/instance/{i}/service" }
  optional {
    health = "observed/instance/{i}/health"
    image  = "observed/instance/{i}/image"
    want   = "desired/service/{svc}/image"
    cpu    = "observed/instance/{i}/resources/cpu"
  }
}

let {
  outdated = "image.hasValue() && image.value() != want.orValue('')"
}

counts {
  params = ["svc"]
  over   = "spec"
  old    = "outdated"
  all    = "true"
}

aggregate "cpu_used" {
  params = ["svc"]
  over   = "spec"
  sum    = "cpu.orValue(0.0)"
}

rule "r" {
  doc       = "d"
  principal = "instances"
  match { n = "effective/service/{svc}/instances" }
  when = "old + all > n && cpu_used > 0.0"
  emit "observed/service/{svc}/restart/failures" { value = "n" }
}
`
	rs, diags := load(t, map[string]string{"r.hcl": src})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	want := map[string][]string{"old": {"image", "want"}, "all": nil, "cpu_used": {"cpu"}}
	r := mustRule(t, rs, "r")
	if len(r.Body.Aggregates) != len(want) {
		t.Fatalf("aggregates %d, want %d", len(r.Body.Aggregates), len(want))
	}
	for _, ag := range r.Body.Aggregates {
		var got []string
		for _, p := range ag.Body.Optional {
			got = append(got, p.Alias)
		}
		if !slices.Equal(got, want[ag.Name]) {
			t.Errorf("%s keeps optionals %v, want %v", ag.Name, got, want[ag.Name])
		}
		if slices.Contains(ag.Body.Binds, "health") {
			t.Errorf("%s still binds health: %v", ag.Name, ag.Body.Binds)
		}
		if len(ag.Body.Match) != 1 {
			t.Errorf("%s: match %v, want the relation's one pattern", ag.Name, ag.Body.Match)
		}
	}
}
