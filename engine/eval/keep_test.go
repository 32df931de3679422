package eval_test

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// putKnown is table.put with the value before, as the mirror reports a
// change (Change.PrevKnown): the store adjusts its results only for those.
func putKnown(tb *table, key, value string) facts.Change {
	old, had := tb.Get(key)
	c := tb.put(key, value)
	c.PrevKnown = true
	if had {
		c.Prev = old.Value
	}
	return c
}

func applyKnown(tb *table, p eval.Plan) []facts.Change {
	var out []facts.Change
	for _, f := range p.Firings {
		for _, w := range f.Writes {
			out = append(out, putKnown(tb, w.Key, string(w.Value)))
		}
	}
	return out
}

// ownWrites: "count" reads each service's placed instances; "place",
// after it, places the pending ones. The count is computed before the
// placements of the same round, which then change it.
const ownWrites = `
rule "count" {
  doc       = "The effective count follows the desired one once the placed instances are counted."
  principal = "intent-resolver"
  match {
    n = "desired/service/{svc}/instances"
  }
  aggregate "placed" {
    match {
      svc  = "observed/instance/{i}/service"
      node = "placement/instance/{i}"
    }
    count = true
  }
  when = "placed >= 0"
  emit "effective/service/{svc}/instances" {
    value = "n + placed - placed"
  }
}
rule "place" {
  doc       = "Every pending instance is placed on node-1."
  principal = "scheduler"
  after     = ["count"]
  match {
    svc = "observed/instance/{id}/service"
    st  = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when = "st == 'pending'"
  emit "placement/instance/{id}" {
    value = "'node-1'"
  }
}
`

// keptReadsTooFew has the store index no result: each service's count of
// five placed instances reads more facts than four, as a large service's
// counts read more than the default limit. Such a count is kept by
// adjusting alone, and dropped by a change the store cannot adjust for.
var keptReadsTooFew = eval.WithMaxKeptReads(4)

// TestOwnWritesKeepCounts: the counts a round computed before its own
// writes changed them are kept as they were, right for the facts the round
// read, and adjusted when the writes come back as changes: the next round
// counts nothing again. (They were dropped, and every service recounted.)
func TestOwnWritesKeepCounts(t *testing.T) {
	rs := loadSrc(t, ownWrites)
	tb := newTable()
	for s := range 10 {
		putKnown(tb, fmt.Sprintf("desired/service/s%d/instances", s), `5`)
	}
	ev := eval.New(rs, eval.WithWholeAggregates(-1)) // counted a group at a time, as the store keeps them
	from := tb.Rev()
	changes := applyKnown(tb, ev.Full(tb))
	// The instances arrive: the round counts each service, then places.
	for s := range 10 {
		for i := range 5 {
			id := fmt.Sprintf("%x%04x", s+1, i)
			changes = append(changes, putKnown(tb, "observed/instance/"+id+"/service", fmt.Sprintf(`"s%d"`, s)),
				putKnown(tb, "observed/instance/"+id+"/state", `"pending"`))
		}
	}
	rev := tb.Rev()
	p := ev.Continue(from, tb, changes, false)
	from = rev
	if len(p.Firings) != 50 {
		t.Fatalf("%d firings, want 50 placements", len(p.Firings))
	}
	// The placements come back; a desired count changes for every service.
	changes = applyKnown(tb, p)
	for s := range 10 {
		changes = append(changes, putKnown(tb, fmt.Sprintf("desired/service/s%d/instances", s), `6`))
	}
	was := ev.Stats()
	p = ev.Continue(from, tb, changes, false)
	after := ev.Stats()
	if n := after.Aggregates - was.Aggregates; n != 0 {
		t.Errorf("the next round counted %d groups again, want 0: the counts were kept and adjusted", n)
	}
	if hits := after.AggregateHits - was.AggregateHits; hits < 10 {
		t.Errorf("%d counts served from the store, want the 10 services'", hits)
	}
	if len(p.Firings) != 10 {
		t.Fatalf("%d firings, want the 10 new effective counts", len(p.Firings))
	}
	for _, f := range p.Firings {
		if f.Bindings["placed"] != "5" || string(f.Writes[0].Value) != "6" {
			t.Errorf("%s: placed %s, wrote %s; want 5 placed and 6", f.Rule, f.Bindings["placed"], f.Writes[0].Value)
		}
	}
}

// TestLargeCountKeptByAdjusting: a count computed over more facts than the
// store indexes (a large service's) is kept all the same, every fact it
// read being one of its own patterns, and adjusted by the next changes:
// the next round counts nothing again. (It was dropped at the round's end
// and recounted in every round that read it.)
func TestLargeCountKeptByAdjusting(t *testing.T) {
	rs := loadSrc(t, ownWrites)
	tb := newTable()
	for s := range 2 {
		putKnown(tb, fmt.Sprintf("desired/service/s%d/instances", s), `5`)
		for i := range 5 {
			id := fmt.Sprintf("%x%04x", s+1, i)
			putKnown(tb, "observed/instance/"+id+"/service", fmt.Sprintf(`"s%d"`, s))
			putKnown(tb, "placement/instance/"+id, `"node-1"`)
		}
	}
	ev := eval.New(rs, eval.WithWholeAggregates(-1), keptReadsTooFew)
	from := tb.Rev()
	if p := ev.Full(tb); len(p.Firings) != 2 {
		t.Fatalf("Full: %d firings, want the 2 effective counts", len(p.Firings))
	}
	// One more instance of s1 is placed; both desired counts change.
	changes := []facts.Change{putKnown(tb, "observed/instance/20005/service", `"s1"`), putKnown(tb, "placement/instance/20005", `"node-1"`),
		putKnown(tb, "desired/service/s0/instances", `6`), putKnown(tb, "desired/service/s1/instances", `7`)}
	was := ev.Stats()
	p := ev.Continue(from, tb, changes, false)
	if n := ev.Stats().Aggregates - was.Aggregates; n != 0 {
		t.Errorf("the next round counted %d groups again, want 0: the counts were kept and adjusted", n)
	}
	placed := map[string]string{}
	for _, f := range p.Firings {
		placed[f.Bindings["svc"]] = f.Bindings["placed"]
	}
	if placed["s0"] != "5" || placed["s1"] != "6" {
		t.Fatalf("placed counted %v, want s0 5 and s1 6 (the placement added)", placed)
	}
}

// TestRestoredCountIsDroppedByItsFacts: a kept count that the round's own
// writes adjusted is restored, at the round's end, as it was before them —
// and must still be found by every fact it counted. Forgetting the writes
// deleted the store's index lists of the written keys; a restored count not
// listed under them again stays stale when one of those facts later changes
// in a way the store cannot adjust for (here the plan is not committed, and
// a placement is then written with its value before unknown). A count that
// read too many facts to be listed at all is dropped by such a change too.
func TestRestoredCountIsDroppedByItsFacts(t *testing.T) {
	t.Run("indexed", func(t *testing.T) { restoredCountIsDropped(t) })
	t.Run("too many reads", func(t *testing.T) { restoredCountIsDropped(t, keptReadsTooFew) })
}

func restoredCountIsDropped(t *testing.T, opts ...eval.Option) {
	rs := loadSrc(t, ownWrites)
	tb := newTable()
	for s := range 2 {
		putKnown(tb, fmt.Sprintf("desired/service/s%d/instances", s), `5`)
	}
	ev := eval.New(rs, append([]eval.Option{eval.WithWholeAggregates(-1)}, opts...)...)
	from := tb.Rev()
	changes := applyKnown(tb, ev.Full(tb))
	// The instances arrive, not yet pending: the round counts none placed
	// and the store keeps the counts.
	for s := range 2 {
		for i := range 5 {
			id := fmt.Sprintf("%x%04x", s+1, i)
			changes = append(changes, putKnown(tb, "observed/instance/"+id+"/service", fmt.Sprintf(`"s%d"`, s)),
				putKnown(tb, "observed/instance/"+id+"/state", `"starting"`))
		}
	}
	rev := tb.Rev()
	changes = applyKnown(tb, ev.Continue(from, tb, changes, false))
	from = rev
	// They turn pending: the round places them, its writes adjust the kept
	// counts, and its end restores them as they were. The plan is lost.
	for s := range 2 {
		for i := range 5 {
			changes = append(changes, putKnown(tb, fmt.Sprintf("observed/instance/%x%04x/state", s+1, i), `"pending"`))
		}
	}
	rev = tb.Rev()
	if p := ev.Continue(from, tb, changes, false); len(p.Firings) != 10 {
		t.Fatalf("%d firings, want the 10 placements", len(p.Firings))
	}
	from = rev
	// Another writer places one instance of s0; its value before is unknown
	// (as after a relist): the store can only drop what could count it.
	changes = []facts.Change{tb.put("placement/instance/10000", `"node-2"`),
		putKnown(tb, "desired/service/s0/instances", `6`), putKnown(tb, "desired/service/s1/instances", `6`)}
	p := ev.Continue(from, tb, changes, false)
	placed := map[string]string{}
	for _, f := range p.Firings {
		if f.Rule == "count" {
			placed[f.Bindings["svc"]] = f.Bindings["placed"]
		}
	}
	if placed["s0"] != "1" || placed["s1"] != "0" {
		t.Fatalf("placed counted %v, want s0 1 (the placement written) and s1 0", placed)
	}
}

// failedCount counts each service's failed instances: its where admits
// one value of the state it matches.
const failedCount = `
rule "failures" {
  doc       = "The effective count follows the desired one once the failed instances are counted."
  principal = "intent-resolver"
  match {
    n = "desired/service/{svc}/instances"
  }
  aggregate "failed" {
    match {
      svc = "observed/instance/{i}/service"
      st  = "observed/instance/{i}/state"
    }
    where = "st == 'failed'"
    count = true
  }
  when = "failed >= 0"
  emit "effective/service/{svc}/instances" {
    value = "n + failed - failed"
  }
}
`

// TestAdjustSkipsValuesTheWhereRefuses: a kept count whose where admits
// only "failed" is not adjusted for a state that changes between other
// values (no member leaves or joins its group), and is for one that
// becomes or stops being "failed"; the counts stay those a fresh
// evaluation finds.
func TestAdjustSkipsValuesTheWhereRefuses(t *testing.T) {
	rs := loadSrc(t, failedCount)
	tb := newTable()
	putKnown(tb, "desired/service/s0/instances", `3`)
	for i := range 3 {
		id := fmt.Sprintf("1%04x", i)
		putKnown(tb, "observed/instance/"+id+"/service", `"s0"`)
		putKnown(tb, "observed/instance/"+id+"/state", `"pending"`)
	}
	ev := eval.New(rs, eval.WithWholeAggregates(-1))
	ev.Full(tb)
	desired := 3
	step := func(n int, state, wantFailed string, wantAdjusted bool) {
		t.Helper()
		from := tb.Rev()
		key := fmt.Sprintf("observed/instance/1%04x/state", n)
		// The desired count changes too, so that the rule fires and shows
		// the count it read.
		desired++
		changes := []facts.Change{putKnown(tb, key, `"`+state+`"`), putKnown(tb, "desired/service/s0/instances", fmt.Sprint(desired))}
		was := ev.Stats()
		p := ev.Continue(from, tb, changes, false)
		st := ev.Stats()
		if n := st.Aggregates - was.Aggregates; n != 0 {
			t.Errorf("%s → %s: counted %d groups again, want the kept count adjusted", key, state, n)
		}
		if adjusted := st.Adjustments > was.Adjustments; adjusted != wantAdjusted {
			t.Errorf("%s → %s: adjusted %v, want %v", key, state, adjusted, wantAdjusted)
		}
		if len(p.Firings) != 1 || p.Firings[0].Bindings["failed"] != wantFailed {
			t.Fatalf("%s → %s: firings %v, want failed = %s", key, state, p.Firings, wantFailed)
		}
		fresh := eval.New(rs).Full(tb)
		if len(fresh.Firings) != 1 || fresh.Firings[0].Bindings["failed"] != wantFailed {
			t.Fatalf("a fresh evaluation counts %v", fresh.Firings)
		}
	}
	step(0, "running", "0", false) // pending → running: neither is failed
	step(1, "failed", "1", true)   // pending → failed: a member joins
	step(1, "stopped", "0", true)  // failed → stopped: it leaves
	step(2, "stopped", "0", false)
	step(0, "f\\u0061iled", "1", true) // an escape is not read: adjusted, and counted
}
