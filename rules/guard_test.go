package rules

import (
	"slices"
	"strings"
	"testing"
)

// A rule's guard list names aggregates its body reads, its own or shared;
// any other name is an error at the name.
func TestRuleGuardList(t *testing.T) {
	src := `
relation "instance" {
  match {
    svc   = "observed/instance/{i}/service"
    state = "observed/instance/{i}/state"
  }
}
counts {
  params = ["svc"]
  over   = "instance"
  live   = "state == 'running'"
}
rule "stop" {
  doc       = "Stop an instance while more than three run."
  principal = "reconcile"
  match { want = "effective/service/{svc}/instances" }
  guard = ["live"]
  when  = "live > 3"
  choose "victim" {
    match { svc = "observed/instance/{v}/service" }
    score = "0"
  }
  delete "placement/instance/{v}" {}
}
`
	rs, diags := LoadFiles(map[string][]byte{"r.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r, _ := rs.Rule("stop")
	guarded := 0
	for _, ag := range r.Body.Aggregates {
		if r.Guarded(ag) {
			guarded++
		}
	}
	if guarded != 1 || !slices.Equal(r.Guards, []string{"live"}) {
		t.Fatalf("guards %v, %d of the body's aggregates guarded; want the shared count live", r.Guards, guarded)
	}
	_, diags = LoadFiles(map[string][]byte{"r.hcl": []byte(strings.Replace(src, `guard = ["live"]`, `guard = ["lve"]`, 1))})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), `r.hcl:17,12`) || !strings.Contains(diags.Error(), `guard names "lve"`) {
		t.Fatalf("an unknown name in guard: %v", diags)
	}
}
