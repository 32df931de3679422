package rules

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// countSummary derives a per-service count for people; okRule (the
// effective count) is what it sits beside.
const countSummary = `summary "instance_count" {
  doc       = "How many instances a service has, for people."
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  aggregate "n" {
    match { svc = "observed/instance/{i}/service" }
    count = true
  }
  derive "observed/service/{svc}/summary" {
    value = "{'running': n, 'healthy': 0, 'updated': 0}"
  }
}
`

// TestSummaryErrors checks that what a summary may not do, and what no
// rule may do with a summary, is refused at the token that does it.
func TestSummaryErrors(t *testing.T) {
	cases := []struct {
		name, src, summary, at, detail string
	}{
		{"a rule reads a summary", countSummary + `rule "reader" {
  doc       = "Reads the summary."
  principal = "instances"
  match { s = "observed/service/{svc}/summary" }
  emit "observed/service/{svc}/restart/reason" {
    value = "'x'"
  }
}
`, "Read of a summary", "r.hcl:16:15", `Rule "reader" reads "observed/service/{svc}/summary", which summary "instance_count" derives (r.hcl:9,10-42)`},
		{"a rule tests a summary's absence", countSummary + `rule "reader" {
  doc       = "Acts while there is no summary."
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  absent = ["observed/service/{svc}/summary"]
  emit "observed/service/{svc}/restart/reason" {
    value = "'x'"
  }
}
`, "Read of a summary", "r.hcl:17:13", "no rule may read one"},
		{"a rule counts summaries in an aggregate", countSummary + `rule "reader" {
  doc       = "Counts the summaries."
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  aggregate "summed" {
    match { s = "observed/service/{other}/summary" }
    count = true
  }
  when = "summed > 0"
  emit "observed/service/{svc}/restart/reason" {
    value = "'x'"
  }
}
`, "Read of a summary", "r.hcl:18:17", "Read the facts it is counted from instead"},
		{"a rule reads a firing record", `rule "reader" {
  doc       = "Reads a record."
  principal = "instances"
  match { e = "event/{id}" }
  emit "observed/service/{id}/restart/reason" {
    value = "'x'"
  }
}
`, "Read of a firing record", "r.hcl:4:15", "the engine's mirror keeps records without their values"},
		{"a summary reads a summary", countSummary + `summary "second" {
  doc       = "Copies the first."
  principal = "instances"
  match { s = "observed/service/{svc}/summary" }
  derive "observed/service/{svc}/restart/reason" {
    value = "'x'"
  }
}
`, "Read of a summary", "r.hcl:16:15", `Summary "second" reads`},
		{"a summary acts", `summary "acting" {
  doc       = "Writes once."
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  emit "observed/service/{svc}/restart/reason" {
    value = "'x'"
  }
}
`, "Action in a summary", "r.hcl:5:3", "has a emit head"},
		{"a summary chooses", `summary "choosing" {
  doc       = "Picks a node."
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  choose "node" {
    match { st = "observed/node/{node}/state" }
  }
  derive "observed/service/{svc}/restart/reason" {
    value = "node"
  }
}
`, "Action in a summary", "r.hcl:5:3", "belongs to actions"},
		{"a rule after a summary", countSummary + `rule "later" {
  doc       = "Ordered after the summary."
  principal = "instances"
  after     = ["instance_count"]
  match { want = "effective/service/{svc}/instances" }
  emit "observed/service/{svc}/restart/reason" {
    value = "'x'"
  }
}
`, "Rule after a summary", "r.hcl:16:16", `Remove "instance_count" from its after list`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, diags := load(t, map[string]string{"r.hcl": c.src})
			if rs != nil {
				t.Fatalf("loaded; want %q at %s", c.summary, c.at)
			}
			var found []string
			for _, d := range diags {
				at := "?"
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

// TestSummariesLast checks that summaries come after every rule whatever
// their names and files, that the rules keep their stratified order, and
// that WithoutSummaries leaves the rules as they were.
func TestSummariesLast(t *testing.T) {
	creator := `rule "zz_create" {
  doc       = "Creates the instances (sorts after the summary by name)."
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  fresh "id" { count = "want" }
  emit "observed/instance/{id}/service" { value = "svc" }
}
`
	rs, diags := load(t, map[string]string{"a.hcl": countSummary, "b.hcl": okRule, "c.hcl": creator})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var names []string
	for i, r := range rs.Rules {
		names = append(names, r.Name)
		if r.Index != i {
			t.Errorf("%s: Index %d at position %d", r.Name, r.Index, i)
		}
	}
	if want := []string{"resolve", "zz_create", "instance_count"}; !slices.Equal(names, want) {
		t.Errorf("order %v, want %v", names, want)
	}
	if r, _ := rs.Rule("instance_count"); !r.Summary || !r.Derives() {
		t.Errorf("instance_count: Summary %v, Derives %v; want a summary deriving", r.Summary, r.Derives())
	}
	ctl := rs.WithoutSummaries()
	if len(ctl.Rules) != 2 || ctl.Rules[0] != rs.Rules[0] || ctl.Rules[1] != rs.Rules[1] {
		t.Errorf("WithoutSummaries: %d rules, want resolve and zz_create as they were", len(ctl.Rules))
	}
	if _, ok := ctl.Rule("instance_count"); ok {
		t.Error("WithoutSummaries still finds instance_count by name")
	}
	if _, ok := rs.Rule("instance_count"); !ok || len(rs.Rules) != 3 {
		t.Error("WithoutSummaries changed the rule set it was called on")
	}
	if plain, _ := load(t, map[string]string{"b.hcl": okRule}); plain.WithoutSummaries() != plain {
		t.Error("WithoutSummaries of a set without summaries is not the set itself")
	}
}
