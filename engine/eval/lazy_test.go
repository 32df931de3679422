package eval_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// ports places a pending instance on a node where no instance exposes a
// port it exposes, for nodes that share their network: the default
// scheduler's port filter, alone. FILTER is the filter's expression.
const ports = `rule "ports" {
  doc       = "Every pending instance is placed on a node without a port clash."
  principal = "scheduler"
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match {
      nstate = "observed/node/{node}/state"
    }
    optional {
      nnet = "observed/node/{node}/network"
    }
    aggregate "clash" {
      match {
        node = "placement/instance/{j}"
        jsvc = "observed/instance/{j}/service"
        jst  = "observed/instance/{j}/state"
        jexp = "desired/service/{jsvc}/expose/{p}"
        mine = "desired/service/{svc}/expose/{p}"
      }
      where = "WHERE"
      count = true
    }
    filters {
      port = "FILTER"
    }
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`

// portsWorld: 20 nodes, the even ones on the host's network; 50 services
// all exposing 8080, one instance of each running, spread over the nodes;
// one pending instance of a new service exposing 8080 too.
func portsWorld() *facts.Table {
	tb := facts.NewTable(nil)
	rev := int64(0)
	put := func(k, v string) {
		rev++
		tb.Put(facts.Fact{Key: k, Value: []byte(v), ModRevision: rev, CreateRevision: rev})
	}
	for i := 1; i <= 20; i++ {
		n := fmt.Sprintf("node-%02d", i)
		put(facts.NodeState(n), `"alive"`)
		if i%2 == 0 {
			put(facts.NodeNetwork(n), `"host"`)
		}
	}
	for i := range 50 {
		svc := fmt.Sprintf("svc-%02d", i)
		id := fmt.Sprintf("%05x", 0x10000+i)
		put(facts.ServiceExpose(svc, 8080), `{}`)
		put(facts.InstanceService(id), fmt.Sprintf(`"%s"`, svc))
		put(facts.InstanceState(id), `"running"`)
		put(facts.Placement(id), fmt.Sprintf(`"node-%02d"`, i%20+1))
	}
	put(facts.ServiceExpose("new", 8080), `{}`)
	put(facts.InstanceService("00001"), `"new"`)
	put(facts.InstanceState("00001"), `"pending"`)
	tb.SetRev(rev)
	return tb
}

func portsPlan(t *testing.T, filter, where string) (eval.Plan, eval.Stats) {
	t.Helper()
	src := strings.NewReplacer("FILTER", filter, "WHERE", where).Replace(ports)
	rs, _, diags := rules.LoadFilesWithSources(map[string][]byte{"ports.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	e := eval.New(rs, eval.WithSeed(1), eval.WithMaxAggregateReads(1<<20))
	return e.Full(portsWorld()), e.Stats()
}

// TestChoiceComputesWhatItReads: a choice's aggregate is computed for a
// candidate only when its filters or score read it, so a count behind a
// short-circuit costs nothing on the nodes that do not need it. The
// decision is the one computing every aggregate gives; the firing's reads
// name the members of what the decision read.
func TestChoiceComputesWhatItReads(t *testing.T) {
	const where = "jst == 'pending' || jst == 'running'"
	lazy, lazyStats := portsPlan(t, "nnet.orValue('') != 'host' || clash == 0", where)
	eager, eagerStats := portsPlan(t, "clash == 0 || nnet.orValue('') != 'host'", where)
	if len(lazy.Firings) != 1 || len(lazy.Problems) > 0 {
		t.Fatalf("%d firings, problems %v: want one placement", len(lazy.Firings), lazy.Problems)
	}
	if len(eager.Firings) != 1 || string(eager.Firings[0].Writes[0].Value) != string(lazy.Firings[0].Writes[0].Value) {
		t.Fatalf("the two orders of the same filter placed differently: %v and %v", lazy.Firings, eager.Firings)
	}
	// Node-01 sorts first and is not on the host's network: no count.
	if got := string(lazy.Firings[0].Writes[0].Value); got != `"node-01"` {
		t.Errorf("placed on %s, want node-01", got)
	}
	// Counted on the ten host nodes alone; read first, on all twenty.
	if lazyStats.Aggregates != 10 || eagerStats.Aggregates != 20 {
		t.Errorf("the count was computed for %d candidates behind the short-circuit, %d read first: want 10 and 20", lazyStats.Aggregates, eagerStats.Aggregates)
	}
	member := func(f eval.Firing) bool {
		for _, r := range f.Reads {
			if strings.HasPrefix(r.Key, "placement/instance/1") {
				return true
			}
		}
		return false
	}
	if member(lazy.Firings[0]) {
		t.Errorf("the firing reads %v, members of a count its decision did not read", lazy.Firings[0].Reads)
	}
	if !member(eager.Firings[0]) {
		t.Errorf("the firing reads %v: want the members of the count its decision read", eager.Firings[0].Reads)
	}
	// On host nodes only, the count decides: every host node has a clash.
	hostOnly, _ := portsPlan(t, "nnet.orValue('') == 'host' && clash == 0", where)
	if len(hostOnly.Firings) != 0 {
		t.Errorf("placed on %v, every host node has a port clash", hostOnly.Firings[0].Writes[0].Value)
	}
	rejected := 0
	for _, r := range hostOnly.Rejections {
		if len(r.Filters) == 1 && r.Filters[0] == "port" {
			rejected++
		}
	}
	if rejected != 20 {
		t.Errorf("%d nodes rejected by port, want all 20", rejected)
	}
}

// TestChoiceAggregateErrorIsAProblem: an aggregate computed as a filter
// reads it reports its error as the rule's problem, and places nothing.
func TestChoiceAggregateErrorIsAProblem(t *testing.T) {
	// Never read, never computed: no error.
	p, _ := portsPlan(t, "!nnet.hasValue()", "1 / (size(jst) - size(jst)) == 0")
	if len(p.Firings) != 1 || len(p.Problems) > 0 {
		t.Fatalf("%d firings, problems %v: want the placement, no problem", len(p.Firings), p.Problems)
	}
	p, _ = portsPlan(t, "!nnet.hasValue() || clash == 0", "1 / (size(jst) - size(jst)) == 0")
	if len(p.Firings) != 0 || len(p.Problems) == 0 {
		t.Fatalf("%d firings, problems %v: want none and a problem", len(p.Firings), p.Problems)
	}
	if msg := p.Problems[0].Error(); !strings.Contains(msg, "division by zero") || !strings.Contains(msg, "port") {
		t.Errorf("problem %q: want the filter named and the division by zero", msg)
	}
}

// TestJoinTakesTheSmallerIndex: counting the port clashes of a (node,
// service) pair starts from the service's ports, then has two index
// lookups to choose from: every service exposing the same port, or the
// node's placements. It takes the node's few placements, not the fifty
// services.
func TestJoinTakesTheSmallerIndex(t *testing.T) {
	p, st := portsPlan(t, "clash == 0", "jst == 'pending' || jst == 'running'")
	if len(p.Firings) != 0 || len(p.Problems) > 0 || len(p.Rejections) != 20 {
		t.Fatalf("%d firings, problems %v, %d rejections: every node has a clash", len(p.Firings), p.Problems, len(p.Rejections))
	}
	// 20 groups; each visits the service's port, the node's 2–3
	// placements and their service, state and port: about 12 facts. Led
	// by the fifty services, a group visits more than fifty.
	perGroup := float64(st.FactsVisited) / float64(max(st.Aggregates, 1))
	t.Logf("%d groups, %d facts visited, %.1f a group", st.Aggregates, st.FactsVisited, perGroup)
	if st.Aggregates != 20 || perGroup > 25 {
		t.Errorf("%d groups, %.1f facts visited a group: want 20 groups, at most 25 facts each", st.Aggregates, perGroup)
	}
}
