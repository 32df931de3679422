package eval

import (
	"reflect"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// TestCandidatesMemo: a choice's candidates come from the round's memo
// until the round writes a fact of a type the choice's patterns read, and
// each use gets bindings and reads of its own.
func TestCandidatesMemo(t *testing.T) {
	src := `rule "place" {
  doc       = "Every unplaced instance is placed on an alive node."
  principal = "scheduler"
  match {
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  choose "node" {
    match {
      nstate = "observed/node/{node}/state"
    }
    filters {
      alive = "nstate == 'alive'"
    }
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`
	rs, _, diags := rules.LoadFilesWithSources(map[string][]byte{"place.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sc := rs.Rules[0].Choose.Body
	tb := facts.NewTable(nil)
	tb.Put(facts.Fact{Key: facts.NodeState("n1"), Value: []byte(`"alive"`), ModRevision: 2, CreateRevision: 2})
	tb.Put(facts.Fact{Key: facts.NodeState("n2"), Value: []byte(`"draining"`), ModRevision: 3, CreateRevision: 3})
	tb.SetRev(3)
	e := New(rs)
	rd := e.newRound(tb, nil)
	outer := &binding{}
	outer.push("id", strVal("i1"))
	outerReads := []Read{{Key: facts.InstanceState("i1"), Rev: 1}}

	nodes := func(l candList) []string {
		var out []string
		for i := range l.len() {
			s := l.at(i, nil)
			// Built in the storage of another candidate, passed over
			// after the choice pushed an aggregate onto it: the same.
			spare := l.at((i+1)%l.len(), nil)
			spare.b.push("used", strVal("3"))
			if r := l.at(i, spare); !reflect.DeepEqual(r.b.strings(), s.b.strings()) || !reflect.DeepEqual(r.reads, s.reads) {
				t.Errorf("candidate %d built in a spare: %v %v, fresh: %v %v", i, r.b.strings(), r.reads, s.b.strings(), s.reads)
			}
			out = append(out, s.b.str("node")+"="+s.b.str("nstate"))
			if len(s.reads) != 2 || s.reads[0] != outerReads[0] || s.reads[1].Key != facts.NodeState(s.b.str("node")) {
				t.Errorf("candidate %s reads %+v, want the outer read then its own", s.b.str("node"), s.reads)
			}
		}
		return out
	}
	steps := []struct {
		name   string
		write  func()
		want   []string
		solved bool // solved again, not served from the memo
	}{
		{name: "first use solves", want: []string{"n1=alive", "n2=draining"}, solved: true},
		{name: "second use is served", want: []string{"n1=alive", "n2=draining"}},
		{name: "a write of another type keeps it", write: func() { rd.ov.put(facts.Placement("i0"), []byte(`"n1"`)) },
			want: []string{"n1=alive", "n2=draining"}},
		{name: "a node's new state is seen", write: func() { rd.ov.put(facts.NodeState("n2"), []byte(`"alive"`)) },
			want: []string{"n1=alive", "n2=alive"}, solved: true},
		{name: "a new node is seen", write: func() { rd.ov.put(facts.NodeState("n3"), []byte(`"alive"`)) },
			want: []string{"n1=alive", "n2=alive", "n3=alive"}, solved: true},
		{name: "a deleted node is gone", write: func() { rd.ov.put(facts.NodeState("n1"), nil) },
			want: []string{"n2=alive", "n3=alive"}, solved: true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.write != nil {
				st.write()
			}
			before := e.stats.Bindings
			sols := rd.candidates(sc, []string{"node"}, outer, outerReads)
			if got := nodes(sols); !equalStrings(got, st.want) {
				t.Fatalf("candidates %v, want %v", got, st.want)
			}
			if solved := e.stats.Bindings != before; solved != st.solved {
				t.Errorf("solved again: %v, want %v", solved, st.solved)
			}
			// Completing one use must not show in the next.
			first := sols.at(0, nil)
			first.b.push("extra", strVal("x"))
			first.reads = append(first.reads, Read{Key: "extra"})
			if again := rd.candidates(sc, []string{"node"}, outer, outerReads).at(0, nil); again.b.has("extra") || len(again.reads) != 2 {
				t.Errorf("a use's pushes leaked into the memo: %v %+v", again.b.names, again.reads)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
