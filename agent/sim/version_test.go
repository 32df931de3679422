package sim_test

import (
	"context"
	"testing"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
)

// A simulated runtime's version changes with every start, stop, exit and
// health knob, and its list is built again then, and only then.
func TestVersionFollowsEveryChange(t *testing.T) {
	ctx := context.Background()
	f, err := sim.NewFleet(sim.Config{Range: sim.NewConfig().Range, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	rt := f.Node("n1")
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
	if l := list(); len(l) != 1 || l[0].Health != agent.Unhealthy || &l[0] == &first[0] {
		t.Errorf("after the health knob: %+v", l)
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
