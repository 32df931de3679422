package eval_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// lazyRules decides on the count of old instances first, as replace_first
// does; the count of all of them matters only once there are old ones.
const lazyRules = `
rule "replace" {
  doc       = "A service with old instances and more placed than wanted gets a note."
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  aggregate "placed" {
    match { isvc = "observed/instance/{i}/service" }
    where = "isvc == svc"
    count = true
  }
  aggregate "old" {
    match {
      isvc  = "observed/instance/{i}/service"
      image = "observed/instance/{i}/image"
    }
    where = "isvc == svc && image != 'web:2'"
    count = true
  }
  let { surplus = "placed - want" }
  when = "%s"
  emit "observed/service/{svc}/restart/reason" { value = "'replacing'" }
}
`

// lazyWorld is a service wanting 3 of its 40 instances, all on its image.
func lazyWorld() *table {
	tb := newTable()
	tb.put(facts.EffectiveInstances("web"), "3")
	for i := range 40 {
		id := fmt.Sprintf("a%04x", i)
		tb.put("observed/instance/"+id+"/service", `"web"`)
		tb.put("observed/instance/"+id+"/image", `"web:2"`)
	}
	return tb
}

// TestConditionComputesWhatItReads: a condition false on its first count
// computes no other aggregate or let; once it holds, the firing reads
// every aggregate's members, as when the body was completed first.
func TestConditionComputesWhatItReads(t *testing.T) {
	computed := func(when string) int64 {
		ev := eval.New(loadSrc(t, fmt.Sprintf(lazyRules, when)))
		if p := ev.Full(lazyWorld()); len(p.Firings) != 0 || len(p.Problems) != 0 {
			t.Fatalf("%s: %d firings, problems %v on a world without old instances", when, len(p.Firings), p.Problems)
		}
		return ev.Stats().Aggregates
	}
	if n := computed("old > 0 && surplus > 0"); n != 1 {
		t.Fatalf("old > 0 first: %d aggregate groups computed, want 1 (old alone)", n)
	}
	if n := computed("surplus > 0 && old > 0"); n != 2 {
		t.Fatalf("surplus > 0 first: %d aggregate groups computed, want 2 (the let reads placed)", n)
	}

	tb := lazyWorld()
	tb.put("observed/instance/a0007/image", `"web:1"`)
	p := eval.New(loadSrc(t, fmt.Sprintf(lazyRules, "old > 0 && surplus > 0"))).Full(tb)
	if len(p.Firings) != 1 {
		t.Fatalf("one old instance: %d firings, problems %v; want one", len(p.Firings), p.Problems)
	}
	// A view decides the same way: one whose condition is false derives
	// nothing and counts nothing it did not read.
	view := strings.Replace(fmt.Sprintf(lazyRules, "old > 0 && surplus > 0"), `emit "observed/service/{svc}/restart/reason" { value = "'replacing'" }`, `derive "observed/service/{svc}/rollout" { value = "{'image': 'web:2', 'updated': placed, 'total': want, 'state': 'progressing', 'reason': ''}" }`, 1)
	vev := eval.New(loadSrc(t, view))
	if p := vev.Full(lazyWorld()); len(p.Firings) != 0 || vev.Stats().Aggregates != 1 {
		t.Fatalf("a view without old instances: %d firings, %d aggregate groups computed; want none and 1", len(p.Firings), vev.Stats().Aggregates)
	}
	// Every member listed, as a recomputation lists them: not the default's few.
	if p = eval.New(loadSrc(t, view), eval.WithMaxAggregateReads(1<<20)).Full(tb); len(p.Firings) != 1 || p.Firings[0].Kind != "derive" {
		t.Fatalf("a view with an old instance: %+v; want it derived", p.Firings)
	}
	members := 0
	for _, r := range p.Firings[0].Reads {
		if strings.HasSuffix(r.Key, "/service") {
			members++
		}
	}
	// placed's 40 members and old's one: both aggregates' reads are the record's.
	if members < 40 {
		t.Fatalf("the firing reads %d instance services; want placed's 40 members among them: %v", members, p.Firings[0].Reads)
	}
}

// TestRecordNamesAFewMembers: by default a firing's record lists at most
// eval.MaxAggregateReads members of each aggregate, unguarded, and holds
// the aggregate's value among its bindings: a count over 40 instances is
// stated as 40, with a few of them named, not all.
func TestRecordNamesAFewMembers(t *testing.T) {
	tb := lazyWorld()
	if eval.MaxAggregateReads >= 40 {
		t.Fatalf("MaxAggregateReads is %d: a count of 40 does not show it bounded", eval.MaxAggregateReads)
	}
	tb.put("observed/instance/a0007/image", `"web:1"`)
	p := eval.New(loadSrc(t, fmt.Sprintf(lazyRules, "old > 0 && surplus > 0"))).Full(tb)
	if len(p.Firings) != 1 {
		t.Fatalf("%d firings, problems %v; want one", len(p.Firings), p.Problems)
	}
	f := p.Firings[0]
	if f.Bindings["placed"] != "40" || f.Bindings["old"] != "1" {
		t.Errorf("bindings %v; want placed 40 and old 1", f.Bindings)
	}
	members := 0
	for _, r := range f.Reads {
		if strings.HasPrefix(r.Key, "observed/instance/") {
			if !r.NoGuard {
				t.Errorf("member %s is guarded", r.Key)
			}
			members++
		}
	}
	// placed lists at most the bound, and old its one member (two facts).
	if members == 0 || members > eval.MaxAggregateReads+2 {
		t.Errorf("the record lists %d member facts; want 1 to %d: %v", members, eval.MaxAggregateReads+2, f.Reads)
	}
}
