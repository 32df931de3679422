package policies_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/facts"
)

// TestCandidateMemoChangesNothing: a round serving a candidate's outcome
// again when the aggregates it read are unchanged (engine/eval/candmemo.go),
// some known unchanged by their groups' versions and not looked up
// (groupvers.go), plans exactly what evaluating every candidate plans, on
// clusters short of room (the cpu and memory filters reject, rejections
// are recorded), with zones, architectures, host-network nodes whose ports
// collide, and random outside changes between rounds.
func TestCandidateMemoChangesNothing(t *testing.T) {
	with, without := plansAgainst(t, eval.WithoutCandidateMemo(), false)
	if without.CandidatesReused != 0 {
		t.Fatalf("%d candidates served with the memo off", without.CandidatesReused)
	}
	if with.CandidatesReused == 0 || with.UnreadAggregates == 0 {
		t.Errorf("%d candidate outcomes served again, %d of their aggregates not looked up: want both", with.CandidatesReused, with.UnreadAggregates)
	}
}

// TestSharedJoinsChangeNothing: a change's dispatch joining alike sites
// once (engine/eval/sites.go) plans exactly what joining each site plans,
// on the same clusters and changes.
func TestSharedJoinsChangeNothing(t *testing.T) {
	with, without := plansAgainst(t, eval.WithoutSharedJoins(), false)
	// The same tasks: a binding handed to a site its own join would not
	// have found wakes a task it would not have.
	if with.Tasks != without.Tasks || with.Evals != without.Evals {
		t.Errorf("tasks %d and CEL evaluations %d with shared joins, %d and %d without: want the same", with.Tasks, with.Evals, without.Tasks, without.Evals)
	}
	if with.FactsVisited >= without.FactsVisited {
		t.Errorf("facts visited %d with shared joins, %d without: want fewer", with.FactsVisited, without.FactsVisited)
	}
}

// TestOwnBackChangesNothing: a round's writes come back in the next
// call's changes dispatched only to the sites the round's own dispatch
// left out (engine/eval/ownback.go) plan the same firings and problems
// that dispatching them in full plans, on the same clusters and changes,
// and the engine records the same rejections. Two things differ, neither
// seen by the engine: the order of the firings of one round (fewer tasks
// queued, they run in another order), and rejections found again
// (dispatched in full, a write come back evaluated again a binding the
// round had found no candidate for, which found the same rejections,
// which recordRejections does not record twice). Fewer facts are visited.
func TestOwnBackChangesNothing(t *testing.T) {
	with, without := plansAgainst(t, eval.WithoutOwnBack(), true)
	t.Logf("%d writes came back; tasks %d and %d, facts visited %d and %d", with.OwnBack, with.Tasks, without.Tasks, with.FactsVisited, without.FactsVisited)
	if without.OwnBack != 0 {
		t.Fatalf("%d writes dispatched as come back with it off", without.OwnBack)
	}
	if with.OwnBack == 0 || with.FactsVisited >= without.FactsVisited {
		t.Errorf("%d writes came back, facts visited %d and %d without: want some, and fewer", with.OwnBack, with.FactsVisited, without.FactsVisited)
	}
}

// TestProbesChangeNothing: tasks a fact their binding names tells
// needless, not queued nor run (engine/eval/probe.go), change no plan,
// rejection or problem, on the same clusters and changes (instances
// failing, stopping, reported elsewhere, services deleted), and facts
// written with values that break their schema; and fewer tasks run.
func TestProbesChangeNothing(t *testing.T) {
	with, without := plansAgainst(t, eval.WithoutProbes(), false)
	t.Logf("tasks %d with probes (%d needless), %d without", with.Tasks, with.Needless, without.Tasks)
	if without.Needless != 0 {
		t.Fatalf("%d tasks found needless with probes off", without.Needless)
	}
	if with.Needless == 0 || with.Tasks >= without.Tasks {
		t.Errorf("tasks %d with probes (%d needless), %d without: want fewer", with.Tasks, with.Needless, without.Tasks)
	}
}

// plansAgainst evaluates the default policies round after round on tight
// worlds with and without off, holds every plan, rejection and problem
// equal, and returns both evaluators' counters, summed.
func plansAgainst(t *testing.T, off eval.Option, asRecorded bool) (with, without eval.Stats) {
	rs := loadDefault(t)
	seeds := uint64(12)
	if testing.Short() {
		seeds = 4
	}
	var placed, rejected int
	for seed := uint64(1); seed <= seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		opts := []eval.Option{eval.WithSeed(seed), eval.WithClock(fixedNow), eval.WithMaxAggregateReads(1 << 20)}
		ew := eval.New(rs, opts...)
		eo := eval.New(rs, append(opts, off)...)
		lastW, lastO := map[string]string{}, map[string]string{}
		twinRounds(r, tightWorld(t, r), ew, eo, 25, 6, func(step int, pw, po eval.Plan) {
			fw, fo := ruletest.ReadsSorted(pw.Firings), ruletest.ReadsSorted(po.Firings)
			sameRejections := reflect.DeepEqual(pw.Rejections, po.Rejections)
			if asRecorded {
				fw, fo = inOrder(fw), inOrder(fo)
				rw, ro := recordedRejections(pw, lastW), recordedRejections(po, lastO)
				sameRejections = reflect.DeepEqual(rw, ro)
			}
			if !reflect.DeepEqual(fw, fo) || !sameRejections ||
				!reflect.DeepEqual(pw.Problems, po.Problems) {
				t.Fatalf("seed %d step %d: plans differ%s\nwith:    %s\nwithout: %s", seed, step, diff(pw, po), show(pw), show(po))
			}
			for _, f := range pw.Firings {
				if f.Rule == "schedule" {
					placed++
				}
			}
			rejected += len(pw.Rejections)
		})
		sw, so := ew.Stats(), eo.Stats()
		with.CandidatesReused += sw.CandidatesReused
		with.UnreadAggregates += sw.UnreadAggregates
		with.FactsVisited += sw.FactsVisited
		with.Tasks += sw.Tasks
		with.Evals += sw.Evals
		with.Needless += sw.Needless
		with.OwnBack += sw.OwnBack
		without.OwnBack += so.OwnBack
		without.CandidatesReused += so.CandidatesReused
		without.FactsVisited += so.FactsVisited
		without.Tasks += so.Tasks
		without.Evals += so.Evals
		without.Needless += so.Needless
	}
	t.Logf("%d placements, %d rejections; candidates served again %d and %d, facts visited %d and %d",
		placed, rejected, with.CandidatesReused, without.CandidatesReused, with.FactsVisited, without.FactsVisited)
	if placed == 0 || rejected == 0 {
		t.Errorf("%d placements, %d rejections: want both", placed, rejected)
	}
	return with, without
}

// inOrder sorts firings by rule and bindings: a plan's firings apart from
// the order its tasks ran in.
func inOrder(fs []eval.Firing) []eval.Firing {
	out := append([]eval.Firing(nil), fs...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return out[i].Rule < out[j].Rule
		}
		return fmt.Sprint(out[i].Bindings) < fmt.Sprint(out[j].Bindings)
	})
	return out
}

// recordedRejections is what the engine records of p's rejections
// (engine.recordRejections): a choice's rejections, by rule and binding,
// when they differ from the last it recorded for that binding in last, and
// not for a binding the plan placed after all. It updates last.
func recordedRejections(p eval.Plan, last map[string]string) []string {
	groups := map[string][]string{}
	for _, r := range p.Rejections {
		k := r.Rule + " " + fmt.Sprint(r.Bindings)
		groups[k] = append(groups[k], fmt.Sprint(r.Candidate, r.Filters))
	}
	for _, f := range p.Firings {
		for _, r := range p.Rejections {
			placed := r.Rule == f.Rule
			for v, x := range r.Bindings {
				if f.Bindings[v] != x {
					placed = false
				}
			}
			if k := r.Rule + " " + fmt.Sprint(r.Bindings); placed {
				delete(groups, k)
				delete(last, k)
			}
		}
	}
	var out []string
	for k, g := range groups {
		sort.Strings(g)
		sig := strings.Join(g, "; ")
		if last[k] != sig {
			last[k] = sig
			out = append(out, k+": "+sig)
		}
	}
	sort.Strings(out)
	return out
}

// tightWorld is a cluster with less room than its services ask for: nodes
// of 1 to 4 cpus in two zones and two architectures, some on the host's
// network, and services of different requests, some pinned to a zone or an
// architecture.
func tightWorld(tb testing.TB, r *rand.Rand) *facts.Table {
	tb.Helper()
	t := facts.NewTable(nil)
	put := func(k, v string) { t.Put(facts.Fact{Key: k, Value: []byte(v), ModRevision: 1, CreateRevision: 1}) }
	nodes := 6 + r.IntN(20)
	for i := 1; i <= nodes; i++ {
		id := fmt.Sprintf("node-%d", i)
		put(facts.NodeState(id), `"alive"`)
		put(facts.NodeCapacityCPU(id), fmt.Sprint(1<<r.IntN(3)))
		put(facts.NodeCapacityMemory(id), fmt.Sprintf(`"%dGi"`, 1<<r.IntN(3)))
		put(facts.NodeArchitecture(id), []string{`"amd64"`, `"arm64"`}[r.IntN(2)])
		put(facts.NodeZone(id), []string{`"zone-1"`, `"zone-2"`}[r.IntN(2)])
		put(facts.NodeAddress(id), fmt.Sprintf(`"10.0.0.%d"`, i))
		if r.IntN(4) == 0 {
			put(facts.NodeNetwork(id), `"host"`)
		}
		t.Put(facts.Fact{Key: facts.Lease(id), Value: []byte(`{}`), ModRevision: 1, CreateRevision: 1, Lease: 1})
	}
	put(facts.Clock(), `"2026-11-29T21:00:00Z"`)
	var src strings.Builder
	for i := range 3 + r.IntN(6) {
		fmt.Fprintf(&src, "service \"svc-%02d\" {\n  image = \"nginx:1.28\"\n  instances = %d\n  expose = [%d]\n", i+1, 2+r.IntN(12), 8080+r.IntN(2))
		fmt.Fprintf(&src, "  resources {\n    cpu = %s\n    memory = \"%dMi\"\n  }\n", []string{"0.25", "0.5", "1", "1.5"}[r.IntN(4)], 128<<r.IntN(4))
		switch r.IntN(4) {
		case 0:
			src.WriteString("  placement { zone = \"zone-2\" }\n")
		case 1:
			src.WriteString("  placement { architecture = \"arm64\" }\n")
		}
		src.WriteString("}\n")
	}
	putSpec(tb, t, "tight.hcl", src.String())
	return t
}

// TestKeptCandidatesChangeNothing: a choice's candidate lists kept from
// one round to the next while no fact of their scope's types changed
// (engine/eval/candkeep.go) plan what solving them again in every round
// plans. Two evaluators converge twin clusters in rounds cut at a small
// firing budget, every placed instance reported running between rounds,
// and now and then a node's lease lost and its state flipped (which must
// drop the kept lists); every round's firings, rejections and problems
// are the same, and fewer facts are visited.
func TestKeptCandidatesChangeNothing(t *testing.T) {
	rs := loadDefault(t)
	tw := applyWorld(t, 20, 4, 400)
	to := copyOf(tw)
	opts := []eval.Option{eval.WithSeed(3), eval.WithClock(fixedNow), eval.WithMaxFirings(40)}
	with, without := eval.New(rs, opts...), eval.New(rs, append(opts, eval.WithoutKeptCandidates())...)
	from := tw.Rev()
	pw, po := with.Full(tw), without.Full(to)
	r := rand.New(rand.NewPCG(3, 7))
	for round := 0; ; round++ {
		if round == 200 {
			t.Fatal("no fixpoint after 200 rounds")
		}
		fw, fo := ruletest.ReadsSorted(pw.Firings), ruletest.ReadsSorted(po.Firings)
		if !reflect.DeepEqual(fw, fo) || !reflect.DeepEqual(pw.Rejections, po.Rejections) || !reflect.DeepEqual(pw.Problems, po.Problems) {
			t.Fatalf("round %d: plans differ%s\nwith:    %s\nwithout: %s", round, diff(pw, po), show(pw), show(po))
		}
		cw, co := applyPlan(tw, pw), applyPlan(to, po)
		cw, co = append(cw, reportRunning(tw, nil)...), append(co, reportRunning(to, nil)...)
		if round%7 == 3 { // a node loses its lease, or every other time comes back
			node := fmt.Sprintf("node-%d", 1+r.IntN(20))
			ms := []mutation{{key: facts.Lease(node)}, {key: facts.NodeState(node), value: `"unreachable"`}}
			if round%14 == 10 {
				ms = []mutation{{key: facts.Lease(node), value: `"alive"`}, {key: facts.NodeState(node), value: `"alive"`}}
			}
			for _, m := range ms {
				cw, co = append(cw, mutate(tw, m)), append(co, mutate(to, m))
			}
		}
		if len(cw) == 0 && !pw.More {
			break
		}
		rev := tw.Rev()
		pw, po = with.Continue(from, tw, cw, false), without.Continue(from, to, co, false)
		from = rev
	}
	sw, so := with.Stats(), without.Stats()
	t.Logf("candidate lists kept %d times; facts visited %d and %d", sw.CandidatesKept, sw.FactsVisited, so.FactsVisited)
	if so.CandidatesKept != 0 {
		t.Fatalf("%d candidate lists kept with keeping off", so.CandidatesKept)
	}
	if sw.CandidatesKept == 0 || sw.FactsVisited >= so.FactsVisited {
		t.Errorf("candidate lists kept %d times, facts visited %d and %d without: want some, and fewer", sw.CandidatesKept, sw.FactsVisited, so.FactsVisited)
	}
}
