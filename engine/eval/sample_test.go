package eval_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

const sampleRules = `
rule "schedule" {
  doc       = "Place each pending instance on the node with the most cpu, among %s."
  principal = "scheduler"
  match {
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match {
      cpu = "observed/node/{node}/capacity/cpu"
    }
    filters {
      some_cpu = "cpu > 0.0"
    }
    score = "cpu"
    %s
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`

// placements runs the rule set once over 8 nodes (node-8 has the most cpu,
// node-1 none) and 40 pending instances, and returns instance -> node.
func placements(t *testing.T, limit string) map[string]string {
	t.Helper()
	return placementsOn(t, 8, limit)
}

// placementsOn is placements over nodes nodes, node-N with the most cpu.
func placementsOn(t *testing.T, nodes int, limit string) map[string]string {
	t.Helper()
	src := fmt.Sprintf(sampleRules, "a sample", limit)
	rs, diags := rules.LoadFiles(map[string][]byte{"sample.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	tb := facts.NewTable(nil)
	rev := int64(0)
	put := func(k, v string) {
		rev++
		tb.Put(facts.Fact{Key: k, Value: []byte(v), ModRevision: rev, CreateRevision: rev})
	}
	for i := 1; i <= nodes; i++ {
		put(facts.NodeCapacityCPU(fmt.Sprintf("node-%d", i)), fmt.Sprint(i-1))
	}
	for i := 0; i < 40; i++ {
		put(facts.InstanceState(fmt.Sprintf("a%04x", i)), `"pending"`)
	}
	tb.SetRev(rev)
	p := eval.New(rs).Full(tb)
	out := map[string]string{}
	for _, f := range p.Firings {
		for _, w := range f.Writes {
			out[w.Key] = string(w.Value)
		}
	}
	if len(out) != 40 {
		t.Fatalf("%d placements, want 40 (problems %v)", len(out), p.Problems)
	}
	return out
}

func TestChoiceScoresABoundedSample(t *testing.T) {
	all := placements(t, "")
	for k, v := range all {
		if v != `"node-8"` {
			t.Fatalf("without a bound, %s went to %s: want the best node, node-8", k, v)
		}
	}
	sampled := placements(t, "candidates = 2")
	if again := placements(t, "candidates = 2"); fmt.Sprint(again) != fmt.Sprint(sampled) {
		t.Fatal("a bounded choice is not deterministic")
	}
	used := map[string]int{}
	for _, v := range sampled {
		if v == `"node-1"` {
			t.Errorf("node-1 fails the filter but was chosen")
		}
		used[v]++
	}
	// Each instance sees two feasible nodes starting at its own offset: the
	// best of a sample, so placements spread beyond node-8.
	if len(used) < 3 {
		t.Errorf("a 2-candidate sample placed on only %v", used)
	}

	if _, diags := rules.LoadFiles(map[string][]byte{"bad.hcl": []byte(fmt.Sprintf(sampleRules, "x", "candidates = 0"))}); !diags.HasErrors() {
		t.Error("candidates = 0 was accepted")
	}
}

// A score choice asks for a good node: past eval.SampleSize candidates the
// engine scores a sample of its own accord. exact = true asks for the best
// of all, and gets it however many there are.
func TestChoiceSamplesLargeSetsUnlessExact(t *testing.T) {
	nodes := 4 * eval.SampleSize
	best := fmt.Sprintf("%q", fmt.Sprintf("node-%d", nodes))
	sampled := placementsOn(t, nodes, "")
	if again := placementsOn(t, nodes, ""); fmt.Sprint(again) != fmt.Sprint(sampled) {
		t.Fatal("the engine's sample is not deterministic")
	}
	used := map[string]int{}
	for _, v := range sampled {
		used[v]++
	}
	if len(used) < 3 {
		t.Errorf("over %d nodes the default choice placed on only %v: it scored every node, not a sample", nodes, used)
	}
	for k, v := range placementsOn(t, nodes, "exact = true") {
		if v != best {
			t.Fatalf("with exact = true, %s went to %s: want the best node, %s", k, v, best)
		}
	}
	for _, bad := range []string{`exact = "yes"`, "exact = 1"} {
		_, diags := rules.LoadFiles(map[string][]byte{"bad.hcl": []byte(fmt.Sprintf(sampleRules, "x", bad))})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), "exact takes true or false") {
			t.Errorf("%s: want the error naming exact, got %v", bad, diags)
		}
	}
}
