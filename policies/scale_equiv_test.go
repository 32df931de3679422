package policies_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// The property tests of views_test.go and store_test.go run on worlds of a
// dozen instances, below every bound the evaluator switches behaviour at:
// a kept aggregate result that read more than maxDeps facts (about a
// thousand instances of one service) is not kept; the store's indexes are
// rebuilt past 65,536 entries; a guarded count over more than
// MaxGuardedReads members orders its stops after the whole plan
// (Firing.AfterAll); a round interns at most maxAbsentKeys absent keys; a
// round's work is committed in slices at its budgets. `ccattler bench` at
// 100,000 instances on 3 nodes, scaled to 3, crosses all of them at once
// (and once left one service at 10,000). These tests cross them on worlds
// of a few thousand instances, some bounds lowered through options, and
// check that the incremental rounds reach the fixpoint a full evaluation
// reaches: no action left, the same derived views.

// scaleCase is one scale-down: services of perSvc instances each on nodes
// nodes, converged running and healthy, then every service scaled to to.
type scaleCase struct {
	name                        string
	nodes, services, perSvc, to int
	opts                        []eval.Option
	skip                        int  // 1 in skip plans does not commit (0: every plan commits)
	lag                         bool // agents report a stop some rounds late
	spread                      int  // the services are scaled one a round, each with a chance of 1 in spread (-1: all in one round)
	// clock: the server's clock (observed/clock) moves on a second every
	// round, as it does between the engine's rounds, a move that does not
	// dispatch a rule that only stamps it (engine/eval/stamp.go).
	clock bool
	// cut > 0: each round ends at one of its first cut checks of its bound,
	// at random, as a round's time budget ends it wherever the time runs
	// out: between two tasks, or in a task before its first binding.
	cut int
}

// bigNodes gives applyWorld's nodes room for every instance the case places.
func bigNodes(t *facts.Table, nodes int) {
	for i := 1; i <= nodes; i++ {
		id := fmt.Sprintf("node-%d", i)
		putFact(t, facts.NodeCapacityCPU(id), `100000`)
		putFact(t, facts.NodeCapacityMemory(id), `"100000Gi"`)
	}
}

// agentReports writes what agents report: every placed instance running and
// healthy on its node, every running instance whose placement is gone
// stopped (some of them a few rounds late when lag).
func agentReports(t *facts.Table, r *rand.Rand, lag bool) []facts.Change {
	out := reportRunning(t, func() bool { return lag && r.IntN(4) == 0 })
	put := func(k, v string) {
		if f, ok := t.Get(k); ok && string(f.Value) == v {
			return
		}
		out = append(out, putFact(t, k, v))
	}
	var stopping []string
	t.Prefix("observed/instance/", func(f facts.Fact) bool {
		if strings.HasSuffix(f.Key, "/state") && string(f.Value) == `"running"` {
			id := strings.Split(f.Key, "/")[2]
			if _, ok := t.Get(facts.Placement(id)); !ok {
				stopping = append(stopping, id)
			}
		}
		return true
	})
	for _, id := range stopping {
		if lag && r.IntN(3) == 0 {
			continue
		}
		put(facts.InstanceState(id), `"stopped"`)
	}
	return out
}

// scaleRun is what a case's rounds did, so that a test can show it crossed
// the bounds it is about.
type scaleRun struct {
	slices, afterAll, dropped int // plans cut at a budget, AfterAll firings, plans partly dropped
	stats                     eval.Stats
}

// runScale runs the case's rounds as the engine does, Continue after
// Continue, and returns the final facts; it fails if no fixpoint is
// reached.
func runScale(t *testing.T, rs *rules.RuleSet, seed uint64, c scaleCase) (*facts.Table, scaleRun) {
	var run scaleRun
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 19))
	tb := applyWorld(t, c.nodes, c.services, c.services*c.perSvc)
	bigNodes(tb, c.nodes)
	opts := append([]eval.Option{eval.WithSeed(seed), eval.WithClock(fixedNow)}, c.opts...)
	checks, cutAt := 0, 0 // a round's checks of its bound so far; the one it ends at (0: none)
	if c.cut > 0 {
		opts = append(opts, eval.WithStop(func() bool { checks++; return cutAt > 0 && checks >= cutAt }))
	}
	ev := eval.New(rs, opts...)
	from := tb.Rev()
	at, _ := time.Parse(time.RFC3339, "2026-11-29T21:00:00Z") // applyWorld's clock
	changes := applyPlan(tb, ev.Full(tb))
	// settle runs rounds until the fixpoint; each round first makes the
	// next of the outside changes given (one user's apply at a time, as
	// `ccattler bench` scales its services one after the other).
	settle := func(what string, outside []func() []facts.Change) {
		more := false
		for round := 0; ; round++ {
			if round == 2000 {
				t.Fatalf("seed %d: %s: no fixpoint after %d rounds", seed, what, round)
			}
			if len(outside) > 0 && (c.spread <= 0 || r.IntN(c.spread) == 0) {
				changes = append(changes, outside[0]()...)
				outside = outside[1:]
			}
			changes = append(changes, agentReports(tb, r, c.lag && round < 40)...)
			if len(changes) == 0 && !more && len(outside) == 0 {
				return
			}
			if c.clock {
				at = at.Add(time.Second)
				changes = append(changes, putFact(tb, facts.Clock(), `"`+at.Format(time.RFC3339)+`"`))
			}
			if c.cut > 0 {
				checks, cutAt = 0, 1+r.IntN(c.cut)
			}
			rev := tb.Rev()
			p := ev.Continue(from, tb, changes, round%3 == 0)
			cutAt = 0 // dropSome's Incremental runs to its end
			from, more = rev, p.More
			if p.More {
				run.slices++
			}
			for _, f := range p.Firings {
				if f.AfterAll {
					run.afterAll++
				}
			}
			if c.skip > 0 && r.IntN(c.skip) == 0 {
				run.dropped++
				changes = dropSome(tb, ev, r, p)
				continue
			}
			changes = applyPlan(tb, p)
		}
	}
	settle("converge", nil)
	count := fmt.Sprint(c.to)
	var scale []func() []facts.Change
	for i := 1; i <= c.services; i++ {
		s := fmt.Sprintf("svc-%05d", i)
		scale = append(scale, func() []facts.Change {
			return []facts.Change{putFact(tb, facts.ServiceInstances(s), count), putFact(tb, facts.Intent("user", s), count)}
		})
	}
	if c.spread < 0 { // all at once
		all := scale
		scale = []func() []facts.Change{func() (out []facts.Change) {
			for _, f := range all {
				out = append(out, f()...)
			}
			return out
		}}
	}
	settle("scale-down", scale)
	run.stats = ev.Stats()
	return tb, run
}

// dropSome commits a plan as the engine does when some of its firings
// are dropped (stale, refused): the rest commit, those that read a dropped
// one's writes are dropped too, the evaluator is told (Uncommitted), and
// the keys the dropped ones write are evaluated again with Incremental,
// whose plan commits. It returns every change committed, which the next
// Continue is told.
func dropSome(tb *facts.Table, ev *eval.Evaluator, r *rand.Rand, p eval.Plan) []facts.Change {
	lost, again := map[string]bool{}, map[string]bool{}
	kept := p
	kept.Firings = nil
	for _, f := range p.Firings {
		drop := r.IntN(3) == 0
		for _, rd := range f.Reads {
			if rd.Own && lost[rd.Key] {
				drop = true
				again[rd.Key] = true
			}
		}
		if f.AfterAll && len(lost) > 0 {
			drop = true
			for _, rd := range f.Reads {
				again[rd.Key] = true
			}
		}
		if !drop {
			kept.Firings = append(kept.Firings, f)
			continue
		}
		for _, w := range f.Writes {
			lost[w.Key], again[w.Key] = true, true
		}
	}
	changes := applyPlan(tb, kept)
	if len(lost) == 0 {
		return changes
	}
	ev.Uncommitted()
	var cs []facts.Change
	for _, k := range slices.Sorted(maps.Keys(again)) {
		if f, ok := tb.Get(k); ok {
			cs = append(cs, facts.Change{Fact: f})
		} else {
			cs = append(cs, facts.Change{Fact: facts.Fact{Key: k, ModRevision: tb.Rev()}, Deleted: true})
		}
	}
	return append(changes, applyPlan(tb, ev.Incremental(tb, cs))...)
}

// checkFixpoint: a fresh evaluator's Full over the final facts (derived
// views left out) takes no action and derives the views the incremental
// rounds left, and every service has the placements it was scaled to.
func checkFixpoint(t *testing.T, rs *rules.RuleSet, seed uint64, tb *facts.Table, c scaleCase) {
	t.Helper()
	views := derivedViewsOf(rs)
	fresh := views.without(tb)
	p := eval.New(rs, eval.WithSeed(seed), eval.WithClock(fixedNow)).Full(fresh)
	left := map[string]int{}
	for _, f := range p.Firings {
		if f.Kind != "derive" {
			left[f.Rule]++
		}
	}
	if len(left) > 0 {
		t.Errorf("seed %d: the incremental fixpoint left actions to take: %v", seed, left)
	}
	applyPlan(fresh, p)
	if got, want := views.of(tb), views.of(fresh); !reflect.DeepEqual(got, want) {
		n := 0
		for k, v := range want {
			if got[k] != v && n < 10 {
				n++
				t.Errorf("seed %d: %s: incremental %q, full %q", seed, k, got[k], v)
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok && n < 10 {
				n++
				t.Errorf("seed %d: %s: incremental %q, full evaluation derives nothing", seed, k, v)
			}
		}
	}
	placed := map[string]int{}
	tb.Prefix("placement/instance/", func(f facts.Fact) bool {
		id := strings.TrimPrefix(f.Key, "placement/instance/")
		sf, _ := tb.Get(facts.InstanceService(id))
		s, _ := facts.StringValue(sf.Value)
		placed[s]++
		return true
	})
	for i := 1; i <= c.services; i++ {
		if s := fmt.Sprintf("svc-%05d", i); placed[s] != c.to {
			t.Errorf("seed %d: %s has %d placements at the fixpoint, want %d", seed, s, placed[s], c.to)
		}
	}
}

// small lowers the bounds a few thousand instances cross to what a few
// hundred do: kept results over 256 accesses, the store's indexes rebuilt
// past 1,024 entries, 8 absent keys interned a round.
var small = []eval.Option{eval.WithMaxKeptReads(256), eval.WithMaxAbsentKeys(8)}

// withSmall is small and then o.
func withSmall(o ...eval.Option) []eval.Option { return append(slices.Clip(small), o...) }

// scalePer is the instances a service of the lowered-bound cases starts
// with: 100, or 50 with -short.
func scalePer() int {
	if testing.Short() {
		return 50
	}
	return 100
}

// TestScaleDownReachesFullFixpoint: services of hundreds of instances on 3
// nodes, converged, then scaled to 3 (all at once, or one apply a round as
// `ccattler bench --scale-to` does), the rounds run as the engine runs
// them: Continue after Continue, every third a tick, the agents reporting
// every stop (some late), some plans partly dropped and their keys
// evaluated again with Incremental, under firing and cost budgets that
// slice the stops. At the fixpoint a fresh Full has nothing left to do and
// derives the same views.
func TestScaleDownReachesFullFixpoint(t *testing.T) {
	rs, per := loadDefault(t), scalePer()
	cases := []scaleCase{
		// Every service's stops in one round.
		{name: "whole-services", nodes: 3, services: 3, perSvc: 2 * per, to: 3, spread: -1, opts: withSmall()},
		// Every aggregate whole, every batch adjusted, a rule's cost
		// budget cutting its work too.
		{name: "whole-aggregates", nodes: 3, services: 4, perSvc: per, to: 3, spread: 2, skip: 4, lag: true,
			opts: withSmall(eval.WithMaxFirings(4*per), eval.WithWholeAggregates(0), eval.WithMaxAdjust(1<<20), eval.WithRoundBudget(20_000, 0))},
	}
	runScaleCases(t, rs, 1, cases)
}

// TestScaleDownSlicedReachesFullFixpoint is TestScaleDownReachesFullFixpoint
// with each service's stops committed in slices: a firing budget of half a
// service's instances.
func TestScaleDownSlicedReachesFullFixpoint(t *testing.T) {
	rs, per := loadDefault(t), scalePer()
	cases := []scaleCase{
		// One apply a round, the stops in slices, parts of plans dropped.
		{name: "sliced", nodes: 3, services: 4, perSvc: per, to: 3, spread: 2, skip: 4, lag: true,
			opts: withSmall(eval.WithMaxFirings(per / 2))},
		// Kept results dropped rather than adjusted.
		{name: "sliced/adjust=0", nodes: 3, services: 4, perSvc: per, to: 3, spread: 2, skip: 4, lag: true,
			opts: withSmall(eval.WithMaxFirings(per/2), eval.WithMaxAdjust(0))},
	}
	runScaleCases(t, rs, 1, cases)
}

// TestScaleDownClockMovingReachesFullFixpoint is the sliced case with the
// server's clock moving on every round and each round also ended wherever
// its bound runs out, as a round's time budget ends it: a task of
// note_stopped cut before its binding is carried to a round in which the
// clock has moved, and the move does not dispatch the rule again. Every
// stopped instance must still get its stopped_at.
func TestScaleDownClockMovingReachesFullFixpoint(t *testing.T) {
	rs, per := loadDefault(t), scalePer()
	cases := []scaleCase{
		{name: "sliced/clock", nodes: 3, services: 4, perSvc: per, to: 3, spread: 2, skip: 4, lag: true, clock: true, cut: 100,
			opts: withSmall(eval.WithMaxFirings(per / 2))},
	}
	runScaleCases(t, rs, 3, cases)
}

// TestScaleDownReachesFullFixpointUnlowered is the whole-services case at
// the evaluator's own bounds: each service's counts read more facts than
// a kept result may, and the store's indexes are rebuilt.
func TestScaleDownReachesFullFixpointUnlowered(t *testing.T) {
	if testing.Short() {
		t.Skip("1,500 instances a service: run without -short")
	}
	rs := loadDefault(t)
	c := scaleCase{name: "whole-services", nodes: 3, services: 2, perSvc: 1500, to: 3, spread: -1}
	tb, run := runScale(t, rs, 1, c)
	checkFixpoint(t, rs, 1, tb, c)
	if run.afterAll == 0 {
		t.Error("no stop was ordered after its whole plan (AfterAll)")
	}
}

// runScaleCases runs each case over seeds and checks that it crossed the
// bounds it is about.
func runScaleCases(t *testing.T, rs *rules.RuleSet, seeds uint64, cases []scaleCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var total scaleRun
			for seed := uint64(1); seed <= seeds; seed++ {
				tb, run := runScale(t, rs, seed, c)
				checkFixpoint(t, rs, seed, tb, c)
				total.slices += run.slices
				total.afterAll += run.afterAll
				total.dropped += run.dropped
				total.stats.WholeAggregates += run.stats.WholeAggregates
			}
			// The bounds the case is about were crossed.
			if total.afterAll == 0 {
				t.Error("no stop was ordered after its whole plan (AfterAll): the guarded counts stayed under MaxGuardedReads")
			}
			if c.skip > 0 && total.dropped == 0 {
				t.Error("no plan was partly dropped")
			}
			if strings.HasPrefix(c.name, "sliced") && total.slices == 0 {
				t.Error("no round stopped at its budget")
			}
			if c.name == "whole-aggregates" && total.stats.WholeAggregates == 0 {
				t.Error("no aggregate computed whole")
			}
		})
	}
}
