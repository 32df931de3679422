package facts_test

import (
	"fmt"

	"github.com/ccattler/ccattler/facts"
)

func ExampleSchema_Parse() {
	k, err := facts.Default.Parse("endpoint/service/web/a8f31")
	if err != nil {
		panic(err)
	}
	fmt.Println(k.Type.Name, k.Var("name"), k.Var("instance-id"))
	raw, _ := facts.Default.Encode(k.String(), map[string]any{"ip": "10.1.0.5", "port": 8080})
	fmt.Println(string(raw))
	_, err = facts.Default.Validate(facts.InstanceState("a8f31"), []byte(`"sleeping"`))
	fmt.Println(err)
	// Output:
	// endpoint.service web a8f31
	// {"ip": "10.1.0.5", "port": 8080}
	// invalid value "sleeping" for observed/instance/a8f31/state: expected one of pending|running|failed|stopped
}
