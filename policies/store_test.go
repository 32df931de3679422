package policies_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// TestAggregateStoreChangesNothing: the default policies evaluated round
// after round with Continue, which keeps aggregate results across rounds,
// plan exactly what an evaluator without any aggregate cache plans, through
// random outside changes (agents' reports, health, leases lost and back,
// nodes draining, intents and images changed, the clock) and plans that do
// not commit.
func TestAggregateStoreChangesNothing(t *testing.T) {
	rs := loadDefault(t)
	seeds := uint64(30)
	if testing.Short() {
		seeds = 8
	}
	for _, adjust := range []int{eval.MaxAdjust, 0} {
		t.Run(fmt.Sprintf("adjust=%d", adjust), func(t *testing.T) { storeChangesNothing(t, rs, seeds, adjust) })
	}
	// Every aggregate that can be computed whole is, at its first group
	// not held: the groups the round computes at once, those its writes
	// then create and the empty ones it answers for change nothing either.
	t.Run("whole", func(t *testing.T) {
		storeChangesNothing(t, rs, seeds, eval.MaxAdjust, eval.WithWholeAggregates(0))
	})
	// Batches too large to adjust every kept result for: the whole
	// aggregates are adjusted still, the rest dropped.
	t.Run("whole/adjust=0", func(t *testing.T) {
		storeChangesNothing(t, rs, seeds, 0, eval.WithWholeAggregates(0))
	})
	// Results that read more than the store lists (a large service's
	// counts), kept by adjusting alone: with the limit at 8 reads nearly
	// every result is one.
	for _, adjust := range []int{eval.MaxAdjust, 0} {
		t.Run(fmt.Sprintf("kept-reads=8/adjust=%d", adjust), func(t *testing.T) {
			storeChangesNothing(t, rs, seeds, adjust, eval.WithMaxKeptReads(8))
		})
	}
}

// storeChangesNothing runs the comparison; adjust 0 drops kept results a
// change could alter instead of adjusting them.
func storeChangesNothing(t *testing.T, rs *rules.RuleSet, seeds uint64, adjust int, opts ...eval.Option) {
	wholes, wholeKept := int64(0), int64(0)
	kept := int64(0)
	for seed := uint64(1); seed <= seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		tw := applyWorld(t, 2+r.IntN(5), 1+r.IntN(3), 2+r.IntN(10))
		// Every member listed: which 64 of more an aggregate lists depends
		// on how its result was reached.
		with := eval.New(rs, append([]eval.Option{eval.WithSeed(seed), eval.WithClock(fixedNow), eval.WithMaxAggregateReads(1 << 20), eval.WithMaxAdjust(adjust)}, opts...)...)
		without := eval.New(rs, eval.WithSeed(seed), eval.WithClock(fixedNow), eval.WithMaxAggregateReads(1<<20), eval.WithoutAggregateCache())
		twinRounds(r, tw, with, without, 60, 8, func(step int, pw, po eval.Plan) {
			if !reflect.DeepEqual(ruletest.ReadsSorted(pw.Firings), ruletest.ReadsSorted(po.Firings)) || !reflect.DeepEqual(pw.Rejections, po.Rejections) ||
				len(pw.Problems) != len(po.Problems) {
				t.Fatalf("seed %d step %d: plans differ%s\nkept results: %s\nnone:         %s", seed, step, diff(pw, po), show(pw), show(po))
			}
		})
		kept += with.Stats().AggregateHits
		wholes += with.Stats().WholeAggregates
		wholeKept += with.Stats().WholeKept
	}
	if kept == 0 {
		t.Error("no aggregate result was ever served from the store")
	}
	if len(opts) > 0 && (wholes == 0 || wholeKept == 0) {
		t.Errorf("%d aggregates computed whole, %d rounds began with one whole from the last: want both", wholes, wholeKept)
	}
}

func fixedNow() time.Time { return time.Date(2026, 11, 29, 21, 0, 30, 0, time.UTC) }

type mutation struct{ key, value string } // value "": delete

// twinRounds evaluates with on tw and without on a copy of it, round
// after round: a full evaluation, then steps rounds of Continue, each
// after check has seen the last pair of plans, the plans have been
// committed (but one time in noCommit) and the same random outside
// changes made to both.
func twinRounds(r *rand.Rand, tw *facts.Table, with, without *eval.Evaluator, steps, noCommit int, check func(step int, pw, po eval.Plan)) {
	to := copyOf(tw)
	from := tw.Rev()
	pw, po := with.Full(tw), without.Full(to)
	for step := 0; step < steps; step++ {
		check(step, pw, po)
		var cw, co []facts.Change
		if r.IntN(noCommit) > 0 { // else the plan does not commit
			cw, co = applyPlan(tw, pw), applyPlan(to, po)
		}
		for _, m := range mutations(r, tw) {
			cw = append(cw, mutate(tw, m))
			co = append(co, mutate(to, m))
		}
		rev, tick := tw.Rev(), r.IntN(4) == 0
		pw, po = with.Continue(from, tw, cw, tick), without.Continue(from, to, co, tick)
		from = rev
	}
}

// copyOf returns a table of t's facts at t's revision.
func copyOf(t *facts.Table) *facts.Table {
	c := facts.NewTable(nil)
	for _, k := range t.Keys() {
		f, _ := t.Get(k)
		c.Put(f)
	}
	c.SetRev(t.Rev())
	return c
}

// mutations draws one to three outside changes of the kinds agents, users
// and the server's clock make, and now and then one whose value breaks its
// fact's schema, which no rule may see (an agent's bug, a hand-written put).
func mutations(r *rand.Rand, t *facts.Table) []mutation {
	var insts, nodes []string
	t.Prefix("observed/instance/", func(f facts.Fact) bool {
		if strings.HasSuffix(f.Key, "/service") {
			insts = append(insts, strings.Split(f.Key, "/")[2])
		}
		return true
	})
	t.Prefix("observed/node/", func(f facts.Fact) bool {
		if strings.HasSuffix(f.Key, "/state") {
			nodes = append(nodes, strings.Split(f.Key, "/")[2])
		}
		return true
	})
	var svcs []string
	t.Prefix("desired/service/", func(f facts.Fact) bool {
		if p := strings.Split(f.Key, "/"); len(p) == 3 {
			svcs = append(svcs, p[2])
		}
		return true
	})
	var out []mutation
	for range 1 + r.IntN(3) {
		switch k := r.IntN(10); {
		case r.IntN(8) == 0 && len(insts) > 0: // a value that breaks its fact's schema
			id := insts[r.IntN(len(insts))]
			bad := []mutation{{facts.InstanceState(id), `42`}, {facts.InstanceAttr(id, "failed_at"), `"yesterday"`},
				{facts.Placement(id), `7`}, {facts.InstanceHealth(id), `{"not":"a health"}`}, {facts.InstanceAttr(id, "stopped_at"), `true`},
				{facts.InstanceService(id), `9`}, {facts.InstanceNode(id), `false`}}
			if len(nodes) > 0 {
				n := nodes[r.IntN(len(nodes))]
				bad = append(bad, mutation{facts.NodeState(n), `3`}, mutation{facts.NodeCapacityCPU(n), `"lots"`}, mutation{facts.NodeZone(n), `[]`})
			}
			if len(svcs) > 0 {
				sv := svcs[r.IntN(len(svcs))]
				bad = append(bad, mutation{facts.ServiceMemory(sv), `"big"`}, mutation{facts.ServiceImage(sv), `5`},
					mutation{facts.EffectiveInstances(sv), `"x"`}, mutation{facts.Intent("user", sv), `"two"`})
			}
			out = append(out, bad[r.IntN(len(bad))])
		case k < 5 && len(insts) > 0: // an agent's report
			id := insts[r.IntN(len(insts))]
			pf, placed := t.Get(facts.Placement(id))
			switch {
			case placed && r.IntN(3) > 0:
				node, _ := facts.StringValue(pf.Value)
				out = append(out, mutation{facts.InstanceNode(id), `"` + node + `"`},
					mutation{facts.InstanceState(id), []string{`"running"`, `"running"`, `"failed"`, `"stopped"`}[r.IntN(4)]},
					mutation{facts.InstanceIP(id), fmt.Sprintf(`"10.0.0.%d"`, r.IntN(250))},
					mutation{facts.InstanceImage(id), []string{`"nginx:1.28"`, `"nginx:1.29"`}[r.IntN(2)]},
					mutation{facts.InstanceStartedAt(id), `"2026-11-29T21:00:01Z"`})
			default:
				out = append(out, mutation{facts.InstanceHealth(id), []string{`"healthy"`, `"unhealthy"`, `"unknown"`}[r.IntN(3)]})
			}
		case k < 7 && len(nodes) > 0: // a lease lost or back, a node drained
			n := nodes[r.IntN(len(nodes))]
			switch r.IntN(3) {
			case 0:
				out = append(out, mutation{facts.Lease(n), ""})
			case 1:
				out = append(out, mutation{facts.Lease(n), `{}`})
			default:
				out = append(out, mutation{facts.NodeState(n), []string{`"alive"`, `"draining"`}[r.IntN(2)]})
			}
		case k < 9 && len(svcs) > 0: // a user's apply
			s := svcs[r.IntN(len(svcs))]
			if r.IntN(2) == 0 {
				out = append(out, mutation{facts.Intent("user", s), fmt.Sprint(r.IntN(6))})
			} else {
				out = append(out, mutation{facts.ServiceImage(s), []string{`"nginx:1.28"`, `"nginx:1.29"`}[r.IntN(2)]})
			}
		default: // the clock
			out = append(out, mutation{facts.Clock(), fmt.Sprintf(`"2026-11-29T21:%02d:00Z"`, r.IntN(60))})
		}
	}
	return out
}

func mutate(t *facts.Table, m mutation) facts.Change {
	if m.value != "" {
		return putFact(t, m.key, m.value)
	}
	rev := t.Rev() + 1
	t.SetRev(rev)
	old, ok := t.Delete(m.key)
	if !ok {
		old = facts.Fact{Key: m.key}
	}
	old.ModRevision = rev
	return facts.Change{Fact: old, Deleted: true, Prev: old.Value, PrevKnown: ok}
}

func show(p eval.Plan) string {
	var b strings.Builder
	for _, f := range p.Firings {
		fmt.Fprintf(&b, "\n  %s %v %v", f.Rule, f.Bindings, f.Writes)
	}
	fmt.Fprintf(&b, "\n  problems %v", p.Problems)
	return b.String()
}

// diff names the first difference of two plans.
func diff(a, b eval.Plan) string {
	fa, fb := ruletest.ReadsSorted(a.Firings), ruletest.ReadsSorted(b.Firings)
	for i := range min(len(fa), len(fb)) {
		if !reflect.DeepEqual(fa[i], fb[i]) {
			return fmt.Sprintf("\nfiring %d (%s):\n  %v %s %+v\n  %v %s %+v", i, fa[i].Rule, fa[i].Bindings, fa[i].Writes, fa[i].Reads, fb[i].Bindings, fb[i].Writes, fb[i].Reads)
		}
	}
	if len(fa) != len(fb) {
		return fmt.Sprintf("\n%d firings, %d", len(fa), len(fb))
	}
	if !reflect.DeepEqual(a.Rejections, b.Rejections) {
		return fmt.Sprintf("\nrejections\n  %+v\n  %+v", a.Rejections, b.Rejections)
	}
	return ""
}
