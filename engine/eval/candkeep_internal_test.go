package eval

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// A kept candidate list is dropped by a change of a fact of its scope's
// types, and not by one of another type under the same prefix (an agent's
// report of a node's available cpu), nor by one elsewhere; by a view that
// does not follow the one it was kept on; and a list that read a write not
// committed is not kept.
func TestKeptCandidatesFollowTheirScopesTypes(t *testing.T) {
	s := facts.NewSchema()
	state, _ := s.Type("observed.node.state")
	lease, _ := s.Type("lease.node")
	sc := &rules.Scope{
		Match:    []*rules.Pattern{{Template: "observed/node/{node}/state", Type: state}},
		Optional: []*rules.Pattern{{Template: "lease/node/{node}", Type: lease}},
	}
	sols := []candSol{{names: []string{"node"}, vals: []val{strVal("n1")}, reads: []Read{{Key: facts.NodeState("n1"), Rev: 7}}}}
	change := func(key string) []facts.Change {
		return []facts.Change{{Fact: facts.Fact{Key: key, Value: []byte(`"x"`)}}}
	}
	kept := func(k *candKeep) bool { _, ok := k.get(sc, ""); return ok }
	fresh := func() *candKeep {
		k := &candKeep{rev: 10}
		k.put(sc, "", sols)
		if !kept(k) {
			t.Fatal("a list of committed reads was not kept")
		}
		return k
	}
	for _, tc := range []struct {
		name string
		from int64
		key  string
		kept bool
	}{
		{"another type under the prefix", 10, facts.NodeAvailableCPU("n1"), true},
		{"elsewhere", 10, facts.InstanceState("a8f31"), true},
		{"a node's state", 10, facts.NodeState("n2"), false},
		{"a node's lease, an optional pattern's", 10, facts.Lease("n1"), false},
		{"a view after another", 11, facts.InstanceState("a8f31"), false},
		{"no view before", -1, facts.InstanceState("a8f31"), false},
	} {
		k := fresh()
		k.follow(tc.from, s, change(tc.key))
		if kept(k) != tc.kept {
			t.Errorf("%s: kept %v, want %v", tc.name, kept(k), tc.kept)
		}
	}
	for _, r := range []Read{{Key: facts.NodeState("n1"), Rev: facts.Uncommitted}, {Key: facts.NodeState("n1"), Own: true}} {
		k := &candKeep{rev: 10}
		k.put(sc, "", []candSol{{reads: []Read{r}}})
		if kept(k) {
			t.Errorf("a list that read %+v was kept", r)
		}
	}
}

// A scope solved under ever new outer values (a choice keyed by each
// instance, say) keeps at most maxKeptLists lists: past them it starts
// over.
func TestKeptCandidatesAreBoundedPerScope(t *testing.T) {
	s := facts.NewSchema()
	state, _ := s.Type("observed.node.state")
	sc := &rules.Scope{Match: []*rules.Pattern{{Template: "observed/node/{node}/state", Type: state}}}
	k := &candKeep{}
	for i := range 3 * maxKeptLists {
		k.put(sc, fmt.Sprint(i), []candSol{{reads: []Read{{Key: facts.NodeState("n1"), Rev: 7}}}})
		if n := len(k.scopes[sc].lists); n > maxKeptLists {
			t.Fatalf("after %d puts %d lists kept, want at most %d", i+1, n, maxKeptLists)
		}
	}
	if _, ok := k.get(sc, fmt.Sprint(3*maxKeptLists-1)); !ok {
		t.Error("the newest list is not kept")
	}
	if _, ok := k.get(sc, "0"); ok {
		t.Error("the oldest list is still kept past the bound")
	}
}
