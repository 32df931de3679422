package eval_test

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// unreadOptionals counts a service's instances on an older image over a
// relation that also names their health, which the count does not read.
const unreadOptionals = `relation "spec" {
  match {
    svc   = "observed/instance/{i}/service"
    state = "observed/instance/{i}/state"
  }
  optional {
    health = "observed/instance/{i}/health"
    image  = "observed/instance/{i}/image"
  }
}

counts {
  params = ["svc"]
  over   = "spec"
  old    = "state == 'running' && image.orValue('') != 'new'"
}

rule "note_old" {
  doc       = "The number of a service's instances on an older image, as a policy intent."
  principal = "policy"
  match { desired = "desired/service/{svc}" }
  derive "intent/policy/service/{svc}/instances" { value = "old" }
}
`

// TestUnreadOptionalChangesNothing: a health report, which the count does
// not read, evaluates nothing and visits no fact; an image report still
// moves the count.
func TestUnreadOptionalChangesNothing(t *testing.T) {
	rs := loadSrc(t, unreadOptionals)
	tb := newTable()
	ev := eval.New(rs)
	tb.put(facts.DesiredService("web"), `{}`)
	for i := range 20 {
		id := fmt.Sprintf("a%04d", i)
		tb.put(facts.InstanceService(id), `"web"`)
		tb.put(facts.InstanceState(id), `"running"`)
		tb.put(facts.InstanceImage(id), `"old"`)
		tb.put(facts.InstanceHealth(id), `"healthy"`)
	}
	from := tb.Rev()
	full := ev.Full(tb)
	if len(full.Problems) > 0 || len(full.Firings) != 1 {
		t.Fatalf("full round: %d firings, problems %v", len(full.Firings), full.Problems)
	}
	tb.apply(full)
	next := func(key, value string) eval.Plan {
		prev, _ := tb.Get(key)
		ch := tb.put(key, value)
		ch.Prev, ch.PrevKnown = prev.Value, true
		rev := tb.Rev()
		p := ev.Continue(from, tb, []facts.Change{ch}, false)
		from = rev
		tb.apply(p)
		return p
	}
	count := func() string {
		f, _ := tb.Get("intent/policy/service/web/instances")
		return string(f.Value)
	}
	next(facts.InstanceHealth("a0003"), `"healthy"`) // the first Continue keeps what Full computed
	if got := count(); got != "20" {
		t.Fatalf("count %s, want 20", got)
	}
	before := ev.Stats()
	if p := next(facts.InstanceHealth("a0007"), `"unhealthy"`); len(p.Firings) != 0 {
		t.Errorf("a health report fired %v", p.Firings)
	}
	if d := ev.Stats(); d.Tasks != before.Tasks || d.FactsVisited != before.FactsVisited || d.Evals != before.Evals {
		t.Errorf("a health report cost %d tasks, %d facts visited, %d evaluations; want none",
			d.Tasks-before.Tasks, d.FactsVisited-before.FactsVisited, d.Evals-before.Evals)
	}
	next(facts.InstanceImage("a0007"), `"new"`)
	if got := count(); got != "19" {
		t.Errorf("after an image report the count is %s, want 19", got)
	}
}
