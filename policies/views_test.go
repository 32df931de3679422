package policies_test

import (
	"reflect"
	"testing"

	"math/rand/v2"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// TestIncrementalViewsEqualFull: the default policies evaluated round after
// round as the engine does (Continue, every round a tick too; with a firing
// budget, a round's work committed in slices), through
// random outside changes, reach the fixpoint a full evaluation of the final
// facts reaches: the same derived views (endpoints, effective counts,
// disruption, rollout status) and no action left to take.
func TestIncrementalViewsEqualFull(t *testing.T) {
	rs := loadDefault(t)
	views := derivedViewsOf(rs)
	seeds := uint64(40)
	if testing.Short() {
		seeds = 10
	}
	slices := 0 // rounds that stopped at their budget
	for seed := uint64(1); seed <= seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		tb := applyWorld(t, 2+r.IntN(6), 1+r.IntN(3), 2+r.IntN(12))
		// A quarter of the seeds evaluate without a firing budget, the
		// rest commit their rounds in slices of 3, 6 or 9 firings.
		budget := int(seed%4) * 3
		ev := eval.New(rs, eval.WithSeed(seed), eval.WithClock(fixedNow), eval.WithMaxFirings(budget))
		from := tb.Rev()
		settle := func(changes []facts.Change, full bool) {
			for round := 0; ; round++ {
				if round == 300 {
					t.Fatalf("seed %d: no fixpoint", seed)
				}
				rev := tb.Rev()
				var p eval.Plan
				if full {
					p, full = ev.Full(tb), false
				} else {
					p = ev.Continue(from, tb, changes, true)
				}
				from = rev
				if p.More && len(p.Firings) < budget {
					t.Fatalf("seed %d: a plan of %d firings stopped short of its budget of %d", seed, len(p.Firings), budget)
				}
				if p.More {
					slices++
				}
				if len(p.Firings) == 0 && !p.More {
					return
				}
				changes = applyPlan(tb, p)
			}
		}
		settle(nil, true)
		for step := 0; step < 30; step++ {
			var changes []facts.Change
			for _, m := range mutations(r, tb) {
				changes = append(changes, mutate(tb, m))
			}
			settle(changes, false)
		}
		// The final facts, derived views left out, evaluated from nothing.
		fresh := views.without(tb)
		fev := eval.New(rs, eval.WithSeed(seed), eval.WithClock(fixedNow))
		p := fev.Full(fresh)
		for _, f := range p.Firings {
			if f.Kind != "derive" {
				t.Fatalf("seed %d: the incremental fixpoint left an action to take: %s %v %v", seed, f.Rule, f.Bindings, f.Writes)
			}
		}
		applyPlan(fresh, p)
		if got, want := views.of(tb), views.of(fresh); !reflect.DeepEqual(got, want) {
			for k, v := range want {
				if got[k] != v {
					t.Errorf("seed %d: %s: incremental %q, full %q", seed, k, got[k], v)
				}
			}
			for k, v := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("seed %d: %s: incremental %q, full evaluation derives nothing", seed, k, v)
				}
			}
			t.FailNow()
		}
	}
	if slices == 0 {
		t.Error("no round stopped at its firing budget: the slicing went untested")
	}
}

// derivedViews tells the facts a rule of rs derives from the others.
type derivedViews struct {
	rs    *rules.RuleSet
	types map[*facts.FactType]bool
}

func derivedViewsOf(rs *rules.RuleSet) derivedViews {
	d := derivedViews{rs: rs, types: map[*facts.FactType]bool{}}
	for _, r := range rs.Rules {
		if r.Derives() {
			for _, h := range r.Heads {
				d.types[h.Type] = true
			}
		}
	}
	return d
}

func (d derivedViews) derived(k string) bool {
	pk, err := d.rs.Schema.Parse(k)
	return err == nil && d.types[pk.Type]
}

// of returns tb's derived facts, key to value.
func (d derivedViews) of(tb *facts.Table) map[string]string {
	out := map[string]string{}
	for _, k := range tb.Keys() {
		if d.derived(k) {
			f, _ := tb.Get(k)
			out[k] = string(f.Value)
		}
	}
	return out
}

// without returns a table of tb's facts but the derived ones, at tb's
// revision: what a fresh evaluator starts from.
func (d derivedViews) without(tb *facts.Table) *facts.Table {
	fresh := facts.NewTable(nil)
	for _, k := range tb.Keys() {
		if !d.derived(k) {
			f, _ := tb.Get(k)
			fresh.Put(f)
		}
	}
	fresh.SetRev(tb.Rev())
	return fresh
}
