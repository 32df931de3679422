package eval_test

import (
	"fmt"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

func Example() {
	rs, diags := rules.LoadFiles(map[string][]byte{"intent.hcl": []byte(`
rule "resolve_intent" {
  doc       = "The effective instance count is the user's intent."
  principal = "intent-resolver"
  match {
    want = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "want"
  }
}`)})
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	t := facts.NewTable(nil)
	t.Put(facts.Fact{Key: "intent/user/service/web/instances", Value: []byte("3"), ModRevision: 7})
	plan := eval.New(rs).Full(t)
	for _, f := range plan.Firings {
		fmt.Printf("%s: %s = %s (read %s at %d)\n", f.Rule, f.Writes[0].Key, f.Writes[0].Value, f.Reads[0].Key, f.Reads[0].Rev)
	}
	// Output:
	// resolve_intent: effective/service/web/instances = 3 (read intent/user/service/web/instances at 7)
}
