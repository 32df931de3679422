package sim_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
)

// instantNode is node n1 of a fleet whose starts take no time and never
// fail.
func instantNode(t *testing.T) (*sim.Fleet, agent.Runtime) {
	t.Helper()
	f, err := sim.NewFleet(sim.Config{Range: sim.NewConfig().Range, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return f, f.Node("n1")
}

// A simulated runtime's version changes with every start, stop, exit and
// health knob, and its list is built again then, and only then.
func TestVersionFollowsEveryChange(t *testing.T) {
	ctx := context.Background()
	f, rt := instantNode(t)
	v := rt.(agent.Versioner)
	list := func() []agent.Status {
		t.Helper()
		l, err := rt.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	seen := v.Version()
	changed := func(what string) {
		t.Helper()
		if now := v.Version(); now == seen {
			t.Errorf("%s: the version stayed %d", what, now)
		} else {
			seen = now
		}
	}
	if _, err := rt.Start(ctx, agent.Spec{ID: "a1", Service: "web", Image: "nginx"}); err != nil {
		t.Fatal(err)
	}
	changed("a start")
	first := list()
	if again := list(); len(again) != 1 || &again[0] != &first[0] {
		t.Errorf("an unchanged runtime listed anew: %d containers", len(again))
	}
	if v.Version() != seen {
		t.Errorf("listing changed the version")
	}
	f.SetHealth("a1", agent.Unhealthy)
	changed("a health knob")
	knobbed := list()
	if len(knobbed) != 1 || knobbed[0].Health != agent.Unhealthy || &knobbed[0] == &first[0] {
		t.Errorf("after the health knob: %+v", knobbed)
	}
	if again := list(); len(again) != 1 || &again[0] != &knobbed[0] {
		t.Errorf("an unchanged runtime with a knob set listed anew: %d containers", len(again))
	}
	if first[0].Health != agent.Healthy {
		t.Errorf("an earlier list changed under its holder: health %q", first[0].Health)
	}
	if !f.Exit("n1", "a1", 1) {
		t.Fatal("no container a1")
	}
	changed("an exit")
	if l := list(); len(l) != 1 || l[0].Running {
		t.Errorf("after the exit: %+v", l)
	}
	if err := rt.Stop(ctx, "a1", 0); err != nil {
		t.Fatal(err)
	}
	changed("a stop")
	if l := list(); len(l) != 0 {
		t.Errorf("after the stop: %d containers", len(l))
	}
	if err := rt.Stop(ctx, "a1", 0); err != nil {
		t.Fatal(err)
	}
	if v.Version() != seen {
		t.Errorf("stopping an unknown container changed the version")
	}
}

// A list handed out is the runtime's own until the next change, which
// copies it first: its holder sees it as it was, whatever starts, stops
// and exits come after, and reads it while they happen (-race).
func TestAListNeverChangesUnderItsHolder(t *testing.T) {
	ctx := context.Background()
	f, rt := instantNode(t)
	for _, id := range []string{"a1", "a2", "a3"} {
		if _, err := rt.Start(ctx, agent.Spec{ID: id, Service: "web", Image: "nginx"}); err != nil {
			t.Fatal(err)
		}
	}
	held, err := rt.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(held)
	done := make(chan struct{})
	go func() { // the holder reads while the runtime changes
		defer close(done)
		for range 1000 {
			for i := range held {
				_ = held[i].Running
				_ = held[i].Spec.ID
			}
		}
	}()
	if err := rt.Stop(ctx, "a1", 0); err != nil { // moves the last into its place
		t.Fatal(err)
	}
	if _, err := rt.Start(ctx, agent.Spec{ID: "a4", Service: "web", Image: "nginx"}); err != nil {
		t.Fatal(err)
	}
	f.Exit("n1", "a2", 3)
	<-done
	if !reflect.DeepEqual(held, want) {
		t.Errorf("the held list changed:\n%+v\nwant\n%+v", held, want)
	}
	now, _ := rt.List(ctx)
	ids := map[string]bool{}
	for _, c := range now {
		ids[c.Spec.ID] = c.Running
	}
	if !reflect.DeepEqual(ids, map[string]bool{"a2": false, "a3": true, "a4": true}) {
		t.Errorf("listed after the changes: %v, want a2 exited, a3 and a4 running", ids)
	}
	// Unchanged since, listing again hands out the same list.
	if again, _ := rt.List(ctx); &again[0] != &now[0] {
		t.Errorf("an unchanged runtime listed anew")
	}
}
