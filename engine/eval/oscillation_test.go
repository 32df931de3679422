package eval_test

import (
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// stopIdle stops the running instances of a service scaled to zero, after
// the endpoints are published: in one round an endpoint is derived, then
// withdrawn when its instance stops.
const stopIdle = `rule "stop_idle" {
  doc       = "A running instance of a service scaled to zero is stopped."
  principal = "instances"
  after     = ["publish_endpoint"]
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
    n     = "desired/service/{svc}/instances"
  }
  when = "state == 'running' && n == 0"
  emit "observed/instance/{id}/state" {
    value = "'stopped'"
  }
}
`

// TestKeyMayComeBackWithinARound: a key that returns to an earlier value
// because its inputs changed in the round is no oscillation: the endpoint
// derived and withdrawn in one round ends absent, and nothing is stopped.
func TestKeyMayComeBackWithinARound(t *testing.T) {
	rs := loadSrc(t, endpointRule+stopIdle)
	tb := newTable()
	tb.put("desired/service/web/expose/80", `{}`)
	tb.put("desired/service/web/instances", `1`)
	tb.put(facts.InstanceService("a0001"), `"web"`)
	tb.put(facts.InstanceIP("a0001"), `"10.0.0.1"`)
	ev := eval.New(rs)
	from := tb.Rev()
	tb.apply(ev.Full(tb))
	// The instance reports running while its service is scaled to zero.
	rev := tb.Rev()
	changes := []facts.Change{tb.put(facts.InstanceState("a0001"), `"running"`), tb.put("desired/service/web/instances", `0`)}
	p := ev.Continue(from, tb, changes, false)
	_ = rev
	if len(p.Problems) > 0 {
		t.Fatalf("problems %v: the endpoint came back to absent because its instance stopped, not in a cycle", p.Problems)
	}
	var stopped, published bool
	for _, f := range p.Firings {
		for _, w := range f.Writes {
			switch {
			case w.Key == facts.InstanceState("a0001") && string(w.Value) == `"stopped"`:
				stopped = true
			case strings.HasPrefix(w.Key, "endpoint/"):
				published = published || w.Value != nil
			}
		}
	}
	tb.apply(p)
	if !stopped {
		t.Errorf("firings %v: want a0001 stopped", p.Firings)
	}
	if _, ok := tb.Get("endpoint/service/web/a0001"); ok {
		t.Errorf("the endpoint of the stopped instance is left (published in the round: %v)", published)
	}
}

// TestOscillationIsTriedAgain: a real cycle is stopped for the round and
// reported, and its bindings are evaluated again in the next call, not
// dropped until a full evaluation.
func TestOscillationIsTriedAgain(t *testing.T) {
	rs := loadSrc(t, `rule "flip" {
  doc       = "Flips a node between alive and draining."
  principal = "failure"
  match {
    s = "observed/node/{n}/state"
  }
  emit "observed/node/{n}/state" {
    value = "s == 'alive' ? 'draining' : 'alive'"
  }
}
`)
	tb := newTable()
	tb.put(facts.NodeState("node-1"), `"alive"`)
	ev := eval.New(rs)
	from := tb.Rev()
	ev.Full(tb)
	tb.put(facts.NodeState("node-2"), `"alive"`)
	for call := 1; call <= 3; call++ {
		rev := tb.Rev()
		var changes []facts.Change
		if call == 1 {
			changes = []facts.Change{{Fact: facts.Fact{Key: facts.NodeState("node-2"), Value: []byte(`"alive"`)}}}
		}
		p := ev.Continue(from, tb, changes, false)
		from = rev
		if len(p.Firings) != 0 || len(p.Problems) == 0 || !strings.Contains(p.Problems[0].Err.Error(), "oscillation") {
			t.Fatalf("call %d: firings %v, problems %v: want flip reported again, nothing written", call, p.Firings, p.Problems)
		}
		if p.More {
			t.Errorf("call %d: the plan asks for another round at once: a cycle would spin the engine", call)
		}
	}
}
