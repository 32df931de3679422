package rules

import (
	"fmt"
	"testing"
)

// Only a choice that scores for one pick asks for a good candidate (the
// engine may sample it); an order list, a pick, no score or exact = true
// ask for the first of every candidate.
func TestChoiceExact(t *testing.T) {
	const src = `
rule "stop" {
  doc       = "Stop one instance of a service."
  principal = "reconcile"
  match { want = "effective/service/{svc}/instances" }
  choose "victim" {
    match { svc = "observed/instance/{v}/service" }
    %s
  }
  delete "placement/instance/{v}" {}
}
`
	for _, tc := range []struct {
		ranking string
		exact   bool
	}{
		{`score = "0"`, false},
		{`score = "0"` + "\nexact = true", true},
		{`score = "0"` + "\nexact = false", false},
		{`order = [desc("v")]`, true},
		{`score = "0"` + "\npick = \"2\"", true},
		{``, true},
	} {
		ranking, exact := tc.ranking, tc.exact
		rs, diags := LoadFiles(map[string][]byte{"r.hcl": []byte(fmt.Sprintf(src, ranking))})
		if diags.HasErrors() {
			t.Fatalf("%s: %s", ranking, diags.Error())
		}
		r, _ := rs.Rule("stop")
		if r.Choose.Exact != exact {
			t.Errorf("%q: Exact = %v, want %v", ranking, r.Choose.Exact, exact)
		}
	}
}
