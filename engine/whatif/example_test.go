package whatif_test

import (
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/engine/whatif"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// A scheduler that packs, compared with one that spreads, on two pending
// instances and two nodes: the second instance would land elsewhere.
func ExampleCompare() {
	schema := facts.NewSchema()
	load := func(score string) *rules.RuleSet {
		src := strings.Replace(schedule, "SCORE", score, 1)
		rs, diags := rules.LoadFiles(map[string][]byte{"scheduler.hcl": []byte(src)}, rules.WithSchema(schema))
		if diags.HasErrors() {
			panic(diags)
		}
		return rs
	}
	snapshot := []facts.Fact{
		{Key: "observed/node/node-1/state", Value: []byte(`"alive"`), ModRevision: 1},
		{Key: "observed/node/node-2/state", Value: []byte(`"alive"`), ModRevision: 2},
		{Key: "observed/instance/a0001/state", Value: []byte(`"pending"`), ModRevision: 3},
		{Key: "observed/instance/a0002/state", Value: []byte(`"pending"`), ModRevision: 4},
	}
	d := whatif.Compare(snapshot, 4, load("-double(placed)"), load("double(placed)"), whatif.Options{})
	for _, c := range d.Changes {
		fmt.Printf("%s: %s %s = %s (running: %s)\n", c.Rule, c.Op, c.Key, c.Value, c.Was)
	}
	fmt.Println(d)
	// Output:
	// schedule: change placement/instance/a0002 = "node-1" (running: "node-2")
	// 0 to put, 1 to change, 0 to delete
}
