package rules_test

import (
	"fmt"
	"os"

	"github.com/ccattler/ccattler/rules"
)

func ExampleLoadFilesWithSources() {
	src := []byte(`rule "resolve_intent" {
  doc       = "The effective count is the user's intent."
  principal = "intent-resolver"
  match {
    want = "intent/user/service/{name}/instances"
  }
  when = "want > 'three'"
  derive "effective/service/{name}/instances" {
    value = "want"
  }
}
`)
	rs, files, diags := rules.LoadFilesWithSources(map[string][]byte{"intent.hcl": src})
	fmt.Println("loaded:", rs != nil)
	rules.WriteDiagnostics(os.Stdout, files, diags)
	// Output:
	// loaded: false
	// intent.hcl:7:16: error: CEL type error
	//    7 |   when = "want > 'three'"
	//      |                ^
	//   In when = "want > 'three'": found no matching overload for '_>_' applied to '(int, string)'
}
