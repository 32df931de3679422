package eval

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// countPlaced counts a service's instances placed on alive nodes: its
// aggregate chains instance → placement → node.
const countPlaced = `rule "count_placed" {
  doc       = "effective/service/{svc}/instances counts the instances of the service placed on alive nodes."
  principal = "intent-resolver"
  match {
    service = "desired/service/{svc}"
  }
  aggregate "placed" {
    match {
      svc    = "observed/instance/{i}/service"
      node   = "placement/instance/{i}"
      nstate = "observed/node/{node}/state"
    }
    where = "nstate == 'alive'"
    count = true
  }
  derive "effective/service/{svc}/instances" {
    value = "placed"
  }
}
`

// TestLiftBindsTheAlias: a new placement reaches a rule through an
// aggregate whose pattern binds the placement's value (the node) but whose
// body does not use it. Finding the affected binding must not scan every
// node's state: the value says which node it is.
func TestLiftBindsTheAlias(t *testing.T) {
	rs, _, diags := rules.LoadFilesWithSources(map[string][]byte{"count.hcl": []byte(countPlaced)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, nodes := range []int{10, 1000} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) {
			tb := facts.NewTable(nil)
			rev := int64(0)
			put := func(k, v string) facts.Change {
				rev++
				f := facts.Fact{Key: k, Value: []byte(v), ModRevision: rev, CreateRevision: rev}
				tb.Put(f)
				tb.SetRev(rev)
				return facts.Change{Fact: f}
			}
			for i := 1; i <= nodes; i++ {
				put(facts.NodeState(fmt.Sprintf("node-%d", i)), `"alive"`)
			}
			put(facts.DesiredService("web"), `{}`)
			put(facts.InstanceService("a8f31"), `"web"`)
			e := New(rs)
			for _, f := range e.Full(tb).Firings { // effective/service/web/instances = 0
				for _, w := range f.Writes {
					put(w.Key, string(w.Value))
				}
			}
			before := e.Stats().FactsVisited
			p := e.Incremental(tb, []facts.Change{put(facts.Placement("a8f31"), `"node-7"`)})
			if len(p.Firings) != 1 || string(p.Firings[0].Writes[0].Value) != "1" {
				t.Fatalf("plan %+v %v, want effective/service/web/instances = 1", p.Firings, p.Problems)
			}
			if visited := e.Stats().FactsVisited - before; visited > 20 {
				t.Errorf("one placement visited %d facts with %d nodes; want a handful, whatever the nodes", visited, nodes)
			}
		})
	}
}

// TestLiftJoinsWhatBindsTheBody: a change reaching a rule through an
// aggregate is joined only with the patterns that bind the body's variables
// (and what those need); the rest would only filter the same binding.
func TestLiftJoinsWhatBindsTheBody(t *testing.T) {
	rs, _, diags := rules.LoadFilesWithSources(map[string][]byte{"count.hcl": []byte(countPlaced)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	r := rs.Rules[0]
	sc := r.Body.Aggregates[0].Body
	svc, node, nstate := sc.Match[0], sc.Match[1], sc.Match[2]
	for _, c := range []struct {
		name      string
		p         *rules.Pattern
		withValue bool
		want      []*rules.Pattern
	}{
		{"an instance's service binds svc itself", svc, true, nil},
		{"without the value, svc comes from the same key", svc, false, nil},
		{"a placement: the instance's service", node, true, []*rules.Pattern{svc}},
		{"a node's state: its placements, then their services", nstate, true, []*rules.Pattern{svc, node}},
	} {
		got := liftJoin(r, sc, c.p, c.withValue)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: joined %v, want %v", c.name, templates(got), templates(c.want))
		}
	}
}

func templates(ps []*rules.Pattern) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Template
	}
	return out
}
