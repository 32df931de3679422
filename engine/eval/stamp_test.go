package eval_test

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

const stampRules = `
rule "stamp" {
  doc       = "A stopped instance gets stopped_at: the clock when it was first seen so."
  principal = "gc"
  match {
    state = "observed/instance/{id}/state"
    clock = "observed/clock"
  }
  absent = ["observed/instance/{id}/stopped_at"]
  # Not a value the engine can look up (state == 'stopped' is): every
  # instance is a binding to evaluate.
  when   = "state != 'running'"
  emit "observed/instance/{id}/stopped_at" { value = "clock" }
}

rule "expire" {
  doc       = "An instance stopped for more than 10s gets a reason."
  principal = "gc"
  match {
    stopped = "observed/instance/{id}/stopped_at"
    clock   = "observed/clock"
  }
  absent = ["observed/instance/{id}/reason"]
  when   = "clock - stopped > duration('10s')"
  emit "observed/instance/{id}/reason" { value = "'expired'" }
}
`

// stampClock is observed/clock's value sec seconds into the tests' minute.
func stampClock(sec int) string { return fmt.Sprintf(`"2026-11-29T12:00:%02dZ"`, sec) }

// stampWorld is the clock at stampClock(0) and n instances in state.
func stampWorld(n int, state string) *table {
	tb := newTable()
	tb.put(facts.Clock(), stampClock(0))
	for i := range n {
		tb.put(facts.InstanceState(fmt.Sprintf("a%04x", i)), `"`+state+`"`)
	}
	return tb
}

// A rule that matches the clock only to stamp it is not evaluated again as
// the clock moves; one that compares it is, and a stamp written later
// carries the clock of the moment.
func TestClockStampDoesNotReevaluate(t *testing.T) {
	ev := eval.New(loadSrc(t, stampRules))
	const n = 200
	tb := stampWorld(n, "running")
	from := tb.rev
	if p := ev.Full(tb); len(p.Firings) != 0 {
		t.Fatalf("%d firings on running instances", len(p.Firings))
	}
	tick := func(sec int, prevKnown bool) (eval.Plan, int64) {
		t.Helper()
		old, _ := tb.Get(facts.Clock())
		c := tb.put(facts.Clock(), stampClock(sec))
		c.Prev, c.PrevKnown = old.Value, prevKnown
		before := ev.Stats().FactsVisited
		p := ev.Continue(from, tb, []facts.Change{c}, false)
		from = tb.rev
		return p, ev.Stats().FactsVisited - before
	}
	// A change that does not say what it replaced might be the clock's
	// creation: every binding is evaluated again.
	if p, visited := tick(1, false); len(p.Firings) != 0 || visited < n {
		t.Fatalf("a clock change of unknown origin: %d firings, %d facts visited; want none, at least %d", len(p.Firings), visited, n)
	}
	if p, visited := tick(2, true); len(p.Firings) != 0 || visited >= n {
		t.Fatalf("the clock moved on: %d firings, %d facts visited; want none, and not every instance visited again", len(p.Firings), visited)
	}

	c := tb.put(facts.InstanceState("a0007"), `"stopped"`)
	p := ev.Continue(from, tb, []facts.Change{c}, false)
	from = tb.rev
	if len(p.Firings) != 1 || p.Firings[0].Rule != "stamp" || string(p.Firings[0].Writes[0].Value) != stampClock(2) {
		t.Fatalf("stopping a0007: %+v; want one stamp of the clock of the moment, %s", p.Firings, stampClock(2))
	}
	tb.apply(p)
	if p, _ := tick(13, true); len(p.Firings) != 1 || p.Firings[0].Rule != "expire" {
		t.Fatalf("13s on: %+v; want a0007 expired: a rule comparing the clock follows it", p.Firings)
	}
}
