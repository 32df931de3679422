package eval

import (
	"slices"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// keptWith stores a result of ag for group gk that read keys, as a round's
// end (keep) finds it.
func keptWith(s *aggStore, ag *rules.Aggregate, gk string, keys ...string) aggRef {
	d := &deps{}
	for _, k := range keys {
		d.get(k)
	}
	if s.groups[ag] == nil {
		s.groups[ag] = map[string]aggEntry{}
	}
	s.groups[ag][gk] = aggEntry{deps: d}
	return aggRef{ag, gk, d}
}

// Results that read the same keys, in any order and however often, share
// one list; adjusting one of them (addNew) neither changes the list the
// others hold nor is undone by adjusting another.
func TestKeptResultsShareTheirReads(t *testing.T) {
	s := newAggStore()
	running, healthy, other := &rules.Aggregate{Name: "running"}, &rules.Aggregate{Name: "healthy"}, &rules.Aggregate{Name: "other"}
	a, b, c := facts.InstanceState("a"), facts.InstanceState("b"), facts.InstanceState("c")
	r1 := keptWith(s, running, "web", b, a, b)
	r2 := keptWith(s, healthy, "web", a, b)
	r3 := keptWith(s, other, "web", a, c)
	s.keep(facts.Default, 1, []aggRef{r1, r2, r3}, nil, nil, nil)

	want := []string{a, b}
	if !slices.Equal(r1.d.gets, want) || !slices.Equal(r2.d.gets, want) {
		t.Fatalf("reads %q and %q, want both %q (sorted, each once)", r1.d.gets, r2.d.gets, want)
	}
	if &r1.d.gets[0] != &r2.d.gets[0] {
		t.Fatal("two results that read the same keys hold two lists")
	}
	if &r3.d.gets[0] == &r1.d.gets[0] {
		t.Fatal("a result that read other keys shares their list")
	}
	if cap(r1.d.gets) != len(r1.d.gets) {
		t.Fatalf("a shared list has room for %d more: an append would write into it", cap(r1.d.gets)-len(r1.d.gets))
	}
	if r1.d.base != 2 || r1.d.size() != 2 {
		t.Fatalf("base %d, size %d: want the 2 distinct keys read", r1.d.base, r1.d.size())
	}

	// Adjusting the running count reads the instance's node; adjusting
	// the healthy count then reads another key.
	node := facts.InstanceNode("a")
	s.index(aggRef{running, "web", r1.d}, r1.d.addNew(&deps{gets: []string{node}}))
	if !slices.Equal(r2.d.gets, want) {
		t.Fatalf("adjusting one result changed another's reads to %q", r2.d.gets)
	}
	health := facts.InstanceHealth("a")
	s.index(aggRef{healthy, "web", r2.d}, r2.d.addNew(&deps{gets: []string{health}}))
	if got := []string{a, b, node}; !slices.Equal(r1.d.gets, got) {
		t.Fatalf("adjusting the second result changed the first's reads to %q, want %q", r1.d.gets, got)
	}
	if got := []string{a, b, health}; !slices.Equal(r2.d.gets, got) {
		t.Fatalf("reads %q, want %q", r2.d.gets, got)
	}
	for _, l := range s.lists[s.hashKeys(want)] {
		if len(l) != 2 || !slices.Equal(l, want) {
			t.Fatalf("the store's shared list became %q", l)
		}
	}

	// A later result that read the same keys shares the list too, and a
	// change of one of them drops every result that read it.
	r4 := keptWith(s, other, "db", a, b)
	s.keep(facts.Default, 2, []aggRef{r4}, nil, nil, nil)
	if &r4.d.gets[0] != &s.lists[s.hashKeys(want)][0][0] {
		t.Fatal("a result computed in a later round holds its own copy of a kept list")
	}
	s.forget(facts.Default, b, nil)
	for _, r := range []aggRef{r1, r2, r4} {
		if _, ok := s.groups[r.ag][r.gk]; ok {
			t.Errorf("%s/%s read %s and is kept after it changed", r.ag.Name, r.gk, b)
		}
	}
	if _, ok := s.groups[other]["web"]; !ok {
		t.Error("a result that did not read the changed key was dropped")
	}

	// Rebuilding the indexes keeps sharing what the kept results hold.
	s.compact()
	r5 := keptWith(s, running, "web", c, a)
	s.keep(facts.Default, 3, []aggRef{r5}, nil, nil, nil)
	if &r5.d.gets[0] != &r3.d.gets[0] {
		t.Fatal("after compact a result with a kept result's reads holds its own list")
	}
}
