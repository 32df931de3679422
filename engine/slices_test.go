package engine

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// A round that would plan more firings than the evaluator's budget is
// committed in slices, each evaluated against the facts the previous ones
// committed: 40 pending instances on 4 nodes with a budget of 7 firings a
// round end up all placed, never more than 7 firings to a revision, and
// spread 10 to a node, which only holds if every slice saw the placements
// of the slices before it (the slice in flight laid over the view: a cut
// round's plan commits while the next evaluates).
func TestRoundCommittedInSlices(t *testing.T) { eachCommitMode(t, testRoundCommittedInSlices) }

func testRoundCommittedInSlices(t *testing.T, cfg Config) {
	v := newEnv(t)
	rs, diags := rules.Load("eval/testdata/choice", rules.WithSchema(v.store.Schema))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	txn := facts.Txn{}
	for n := 1; n <= 4; n++ {
		id := fmt.Sprintf("n%d", n)
		txn.Ops = append(txn.Ops, facts.Put(facts.NodeState(id), []byte(`"alive"`)),
			facts.Put(facts.NodeCapacityCPU(id), []byte(`100`)))
	}
	txn.Ops = append(txn.Ops, facts.Put(facts.ServiceAttr("web", "resources/cpu"), []byte(`1`)))
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("a%04x", i)
		txn.Ops = append(txn.Ops, facts.Put(facts.InstanceService(id), []byte(`"web"`)),
			facts.Put(facts.InstanceState(id), []byte(`"pending"`)))
	}
	if _, err := v.store.Commit(v.ctx, txn); err != nil {
		t.Fatal(err)
	}
	const budget = 7
	e := v.engine(t, NewRuleSetEvaluator(rs, nil, eval.WithSeed(1), eval.WithMaxFirings(budget)), cfg)
	v.run(t, e)
	settle(t, v, e)

	perNode := map[string]int{}
	for i := 0; i < 40; i++ {
		f, ok := v.get(t, facts.Placement(fmt.Sprintf("a%04x", i)))
		if !ok {
			t.Fatalf("instance a%04x not placed", i)
		}
		node, _ := facts.StringValue(f.Value)
		perNode[node]++
	}
	for n := 1; n <= 4; n++ {
		if got := perNode[fmt.Sprintf("n%d", n)]; got != 10 {
			t.Errorf("node n%d holds %d instances, want 10 (spread: %v)", n, got, perNode)
		}
	}
	perRev := map[int64]int{}
	for _, ev := range v.events(t) {
		if ev.Kind != KindRejection {
			perRev[ev.Rev]++
		}
	}
	for rev, n := range perRev {
		if n > budget {
			t.Errorf("revision %d commits %d firings, more than the budget of %d", rev, n, budget)
		}
	}
	if len(perRev) < 40/budget {
		t.Errorf("%d revisions with firings, want at least %d slices", len(perRev), 40/budget)
	}
	if st := e.Stats(); st.ApplyOverlapTime <= 0 { // cut rounds overlap in either mode
		t.Errorf("ApplyOverlapTime %v: no slice was evaluated while the one before it committed", st.ApplyOverlapTime)
	}
}
