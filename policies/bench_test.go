package policies_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/ccattler/ccattler/rules"
)

// applyWorld returns the facts right after `ccattler bench` applies its
// services: nodes alive with their capacity, the services' desired facts
// and intents, nothing derived yet.
func applyWorld(tb testing.TB, nodes, services, instances int) *facts.Table {
	tb.Helper()
	t := facts.NewTable(nil)
	put := func(k, v string) { t.Put(facts.Fact{Key: k, Value: []byte(v), ModRevision: 1, CreateRevision: 1}) }
	for i := 1; i <= nodes; i++ {
		id := fmt.Sprintf("node-%d", i)
		put(facts.NodeState(id), `"alive"`)
		put(facts.NodeCapacityCPU(id), `8`)
		put(facts.NodeCapacityMemory(id), `"8Gi"`)
		put(facts.NodeArchitecture(id), `"amd64"`)
		put(facts.NodeZone(id), `"zone-1"`)
		put(facts.NodeAddress(id), fmt.Sprintf(`"10.0.%d.%d"`, i>>8&255, i&255))
		t.Put(facts.Fact{Key: facts.Lease(id), Value: []byte(`{}`), ModRevision: 1, CreateRevision: 1, Lease: 1}) // an agent's live lease
	}
	put(facts.Clock(), `"2026-11-29T21:00:00Z"`)
	var src strings.Builder
	for i := 0; i < services; i++ {
		n := instances / services
		if i < instances%services {
			n++
		}
		fmt.Fprintf(&src, "service \"svc-%05d\" {\n  image = \"nginx:1.28\"\n  instances = %d\n  expose = [8080]\n  resources {\n    cpu = 0.1\n    memory = \"64Mi\"\n  }\n}\n", i+1, n)
	}
	putSpec(tb, t, "bench.hcl", src.String())
	return t
}

// putSpec writes the facts an apply of the HCL src writes into t, at
// revision 1.
func putSpec(tb testing.TB, t *facts.Table, name, src string) {
	tb.Helper()
	doc, diags := spec.Decode(spec.Source{Name: name, Bytes: []byte(src)})
	if diags.HasErrors() {
		tb.Fatal(diags.Error())
	}
	for _, f := range doc.Facts() {
		t.Put(facts.Fact{Key: f.Key, Value: f.Value, ModRevision: 1, CreateRevision: 1})
	}
}

// BenchmarkApply is the engine's work after `ccattler bench` applies its
// services, without etcd: rounds of the default policies, each plan's
// writes applied before the next (as the engine's commits come back through
// the mirror), until every instance is placed: resolve intents, create
// every instance, place each on a node. Each round's time is reported.
func BenchmarkApply(b *testing.B) {
	rs := loadDefault(b)
	for _, sz := range []struct{ nodes, services, instances int }{{100, 10, 1000}, {1000, 100, 10000}} {
		b.Run(fmt.Sprintf("nodes=%d/instances=%d", sz.nodes, sz.instances), func(b *testing.B) {
			var rounds []time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				t := applyWorld(b, sz.nodes, sz.services, sz.instances)
				b.StartTimer()
				rounds = rounds[:0]
				ev := eval.New(rs)
				start := time.Now()
				p := ev.Full(t)
				placed := 0
				for len(p.Firings) > 0 && len(rounds) < 10 {
					rounds = append(rounds, time.Since(start))
					changes := applyPlan(t, p)
					for _, f := range p.Firings {
						if f.Rule == "schedule" {
							placed++
						}
					}
					start = time.Now()
					p = ev.Incremental(t, changes)
				}
				if placed != sz.instances {
					b.Fatalf("%d placements, want %d (problems %v)", placed, sz.instances, p.Problems)
				}
			}
			for i, d := range rounds {
				b.ReportMetric(d.Seconds(), fmt.Sprintf("s/round%d", i+1))
			}
			b.ReportMetric(float64(sz.instances)*float64(b.N)/b.Elapsed().Seconds(), "instances/s")
		})
	}
}

// applyPlan writes a plan into t as a commit at the next revision would,
// and returns the changes the mirror would deliver.
func applyPlan(t *facts.Table, p eval.Plan) []facts.Change {
	rev := t.Rev() + 1
	t.SetRev(rev)
	var changes []facts.Change
	for _, f := range p.Firings {
		for _, w := range f.Writes {
			if w.Value == nil {
				if old, ok := t.Delete(w.Key); ok {
					old.ModRevision = rev
					changes = append(changes, facts.Change{Fact: old, Deleted: true, Prev: old.Value, PrevKnown: true})
				}
				continue
			}
			cr := rev
			var prev []byte
			if old, ok := t.Get(w.Key); ok {
				cr, prev = old.CreateRevision, old.Value
			}
			nf := facts.Fact{Key: w.Key, Value: w.Value, ModRevision: rev, CreateRevision: cr}
			t.Put(nf)
			changes = append(changes, facts.Change{Fact: nf, Prev: prev, PrevKnown: true})
		}
	}
	return changes
}

// convergedWorld returns applyWorld's cluster after the engine placed every
// instance and the agents reported each running and healthy, the engine's
// rounds run to their fixpoint (every endpoint written), and the evaluator
// that ran them.
func convergedWorld(b *testing.B, rs *rules.RuleSet, nodes, services, instances int) (*facts.Table, *eval.Evaluator, int64) {
	b.Helper()
	t, ev, from, _ := converge(b, rs, nodes, services, instances)
	return t, ev, from
}

// converge is convergedWorld with the evaluator's options, returning how
// long each round took.
func converge(b *testing.B, rs *rules.RuleSet, nodes, services, instances int, opts ...eval.Option) (*facts.Table, *eval.Evaluator, int64, []time.Duration) {
	b.Helper()
	return convergeWorld(b, applyWorld(b, nodes, services, instances), rs, opts...)
}

// convergeWorld runs the engine's rounds on t from a full one, every
// placed instance reported running and healthy between rounds, until the
// fixpoint.
func convergeWorld(b *testing.B, t *facts.Table, rs *rules.RuleSet, opts ...eval.Option) (*facts.Table, *eval.Evaluator, int64, []time.Duration) {
	b.Helper()
	ev := eval.New(rs, opts...)
	from := t.Rev()
	start := time.Now()
	full := ev.Full(t)
	changes, more := applyPlan(t, full), full.More
	took := []time.Duration{time.Since(start)}
	for round := 0; round < 400; round++ {
		changes = append(changes, reportRunning(t, nil)...)
		if len(changes) == 0 && !more {
			return t, ev, from, took
		}
		rev := t.Rev()
		start := time.Now()
		p := ev.Continue(from, t, changes, false)
		took = append(took, time.Since(start))
		from, more = rev, p.More
		changes = applyPlan(t, p)
	}
	b.Fatal("no fixpoint after 400 rounds")
	return nil, nil, 0, nil
}

// reportRunning is what the agents report of every placed instance once
// it runs, as changes (none for a fact already so); skip, when not nil,
// holds an instance's report back for now.
func reportRunning(t *facts.Table, skip func() bool) []facts.Change {
	var out []facts.Change
	put := func(k, v string) {
		if f, ok := t.Get(k); ok && string(f.Value) == v {
			return
		}
		out = append(out, putFact(t, k, v))
	}
	var placed []facts.Fact
	t.Prefix("placement/instance/", func(f facts.Fact) bool {
		placed = append(placed, f)
		return true
	})
	for n, f := range placed {
		id := strings.TrimPrefix(f.Key, "placement/instance/")
		if skip != nil && skip() {
			continue
		}
		put(facts.InstanceNode(id), string(f.Value))
		put(facts.InstanceState(id), `"running"`)
		put(facts.InstanceImage(id), `"nginx:1.28"`)
		put(facts.InstanceIP(id), fmt.Sprintf(`"10.%d.%d.%d"`, n>>16&255, n>>8&255, n&255))
		put(facts.InstanceHealth(id), `"healthy"`)
		put(facts.InstanceStartedAt(id), `"2026-11-29T21:00:01Z"`)
	}
	return out
}

// BenchmarkConverge is the engine's part of `ccattler bench`'s converge
// phase without etcd or agents: from the apply to the fixpoint, every
// placed instance reported running and healthy between rounds (as all
// agents at once would), with and without the engine's firing budget
// (engine.Config.RoundFirings), which commits a large round in slices.
func BenchmarkConverge(b *testing.B) {
	rs := loadDefault(b)
	for _, sz := range []struct{ nodes, services, instances int }{{100, 10, 1000}, {1000, 100, 10000}} {
		for _, v := range []struct {
			budget int
			memo   bool
		}{{0, true}, {5000, true}, {5000, false}} {
			budget := v.budget
			name := fmt.Sprintf("nodes=%d/instances=%d/round-firings=%d", sz.nodes, sz.instances, budget)
			opts := []eval.Option{eval.WithMaxFirings(budget)}
			if budget > 0 {
				// Against the baseline, every candidate a choice visits
				// evaluated (candidate-memo=off).
				name += fmt.Sprintf("/candidate-memo=%s", map[bool]string{true: "on", false: "off"}[v.memo])
			}
			if !v.memo {
				opts = append(opts, eval.WithoutCandidateMemo())
			}
			b.Run(name, func(b *testing.B) {
				var rounds, slowest time.Duration
				var evals, reused int64
				n := 0
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					runtime.GC()
					b.StartTimer()
					_, ev, _, took := converge(b, rs, sz.nodes, sz.services, sz.instances, opts...)
					st := ev.Stats()
					evals += st.Evals
					reused += st.CandidatesReused
					n += len(took)
					for _, d := range took {
						rounds += d
						slowest = max(slowest, d)
					}
				}
				b.ReportMetric(float64(n)/float64(b.N), "rounds/op")
				b.ReportMetric(float64(evals)/float64(b.N), "evals/op")
				b.ReportMetric(float64(reused)/float64(b.N), "candidates-reused/op")
				b.ReportMetric(rounds.Seconds()/float64(b.N), "s-in-rounds/op")
				b.ReportMetric(slowest.Seconds(), "s/slowest-round")
				b.ReportMetric(float64(sz.instances)*float64(b.N)/rounds.Seconds(), "instances/s")
			})
		}
	}
}

// BenchmarkConvergeBudgeted is BenchmarkConverge under the server's round
// budgets (engine.NewConfig: firings, CEL cost and time per rule), where a
// costly rule's work is spread over rounds: its rounds/op is how many
// commits the server would wait for. The time budget is wall time, so
// rounds/op grows on a loaded machine; budget=firings+cost leaves it out,
// so that its rounds, bytes and allocations do not depend on the machine.
func BenchmarkConvergeBudgeted(b *testing.B) {
	rs := loadDefault(b)
	cfg := engine.NewConfig()
	for _, sz := range []struct{ nodes, services, instances int }{{1000, 100, 10000}} {
		for _, budget := range []string{"server", "firings+cost"} {
			roundTime := cfg.RoundTime
			if budget != "server" {
				roundTime = 0
			}
			b.Run(fmt.Sprintf("nodes=%d/instances=%d/budget=%s", sz.nodes, sz.instances, budget), func(b *testing.B) {
				var rounds time.Duration
				n := 0
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					runtime.GC()
					b.StartTimer()
					_, _, _, took := converge(b, rs, sz.nodes, sz.services, sz.instances,
						eval.WithMaxFirings(cfg.RoundFirings), eval.WithRoundBudget(cfg.RoundCost, roundTime))
					n += len(took)
					for _, d := range took {
						rounds += d
					}
				}
				b.ReportMetric(float64(n)/float64(b.N), "rounds/op")
				b.ReportMetric(float64(sz.instances)*float64(b.N)/rounds.Seconds(), "instances/s")
			})
		}
	}
}

// fixpoint runs rounds as the engine does, each plan applied before the
// next, from changes until a round plans nothing and carries nothing; from
// is the revision of the previous round's reader. It returns the firings
// planned.
func fixpoint(b *testing.B, t *facts.Table, ev *eval.Evaluator, from *int64, changes []facts.Change, limit int) int {
	b.Helper()
	firings := 0
	for r, more := 0, false; len(changes) > 0 || more; r++ {
		if r == limit {
			b.Fatalf("no fixpoint after %d rounds", limit)
		}
		rev := t.Rev()
		p := ev.Continue(*from, t, changes, false)
		*from, more = rev, p.More
		firings += len(p.Firings)
		changes = applyPlan(t, p)
	}
	return firings
}

func putFact(t *facts.Table, k, v string) facts.Change {
	rev := t.Rev() + 1
	t.SetRev(rev)
	cr := rev
	var prev []byte
	if old, ok := t.Get(k); ok {
		cr, prev = old.CreateRevision, old.Value
	}
	f := facts.Fact{Key: k, Value: []byte(v), ModRevision: rev, CreateRevision: cr}
	if strings.HasPrefix(k, "lease/") {
		f.Lease = 1 // an agent's lease: held on a live etcd lease
	}
	t.Put(f)
	return facts.Change{Fact: f, Prev: prev, PrevKnown: true}
}

// BenchmarkHealthChange is the engine's part of `ccattler bench`'s change
// phase, without etcd: in a converged cluster, one instance's health flips
// and the rounds it causes run to their fixpoint; the endpoint must go
// (unhealthy) or come back (healthy).
func BenchmarkHealthChange(b *testing.B) {
	rs := loadDefault(b)
	for _, sz := range []struct{ nodes, services, instances int }{{100, 10, 1000}, {1000, 100, 10000}} {
		b.Run(fmt.Sprintf("nodes=%d/instances=%d", sz.nodes, sz.instances), func(b *testing.B) {
			t, ev, from := convergedWorld(b, rs, sz.nodes, sz.services, sz.instances)
			ids := placedIDs(t)
			before := ev.Stats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := ids[(i/2*7919)%len(ids)]
				health := `"unhealthy"`
				if i%2 == 1 {
					health = `"healthy"`
				}
				fixpoint(b, t, ev, &from, []facts.Change{putFact(t, facts.InstanceHealth(id), health)}, 10)
				svc, _ := t.Get(facts.InstanceService(id))
				name, _ := facts.StringValue(svc.Value)
				if _, ok := t.Get("endpoint/service/" + name + "/" + id); ok != (i%2 == 1) {
					b.Fatalf("health %s of %s: endpoint present %v", health, id, ok)
				}
			}
			reportWork(b, before, ev.Stats())
		})
	}
}

// BenchmarkRestartBatch is a batch of agent reports in a converged
// cluster, without etcd: a thousand instances restarted, each reporting
// several facts at once (health, image, start time, address), first
// unhealthy, then healthy again, and the rounds they cause run to their
// fixpoint. The kept counts over each instance's facts are adjusted for
// the batch (aggstore.go): the work per member, not per changed fact.
func BenchmarkRestartBatch(b *testing.B) {
	rs := loadDefault(b)
	t, ev, from := convergedWorld(b, rs, 1000, 100, 10000)
	ids := placedIDs(t)
	before := ev.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		health, image := `"unhealthy"`, `"nginx:1.28-restarted"`
		if i%2 == 1 {
			health, image = `"healthy"`, `"nginx:1.28"`
		}
		var changes []facts.Change
		for j := range 1000 {
			id := ids[(i/2*1000+j)*7919%len(ids)]
			changes = append(changes, putFact(t, facts.InstanceHealth(id), health), putFact(t, facts.InstanceImage(id), image),
				putFact(t, facts.InstanceStartedAt(id), fmt.Sprintf(`"2026-11-29T21:%02d:%02dZ"`, i/60%60, i%60)),
				putFact(t, facts.InstanceIP(id), fmt.Sprintf(`"10.1.%d.%d"`, j>>8, j&255)))
		}
		fixpoint(b, t, ev, &from, changes, 20)
	}
	reportWork(b, before, ev.Stats())
}

// placedIDs lists the placed instances, in key order.
func placedIDs(t *facts.Table) []string {
	var ids []string
	t.Prefix("placement/instance/", func(f facts.Fact) bool {
		ids = append(ids, strings.TrimPrefix(f.Key, "placement/instance/"))
		return true
	})
	return ids
}

// reportWork reports the aggregates computed and facts visited per op
// between two of an evaluator's Stats.
func reportWork(b *testing.B, before, after eval.Stats) {
	b.ReportMetric(float64(after.Aggregates-before.Aggregates)/float64(b.N), "aggregates/op")
	b.ReportMetric(float64(after.FactsVisited-before.FactsVisited)/float64(b.N), "facts/op")
}

// BenchmarkClock is what the engine does every second in a converged
// cluster, without etcd: the server's clock moves (observed/clock) and the
// rules that read now are evaluated (a tick).
func BenchmarkClock(b *testing.B) {
	rs := loadDefault(b)
	for _, sz := range []struct{ nodes, services, instances int }{{100, 10, 1000}, {1000, 100, 10000}} {
		b.Run(fmt.Sprintf("nodes=%d/instances=%d", sz.nodes, sz.instances), func(b *testing.B) {
			t, ev, from := convergedWorld(b, rs, sz.nodes, sz.services, sz.instances)
			at := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
			before := ev.Stats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				changes := []facts.Change{putFact(t, facts.Clock(), `"`+at.Add(time.Duration(i+1)*time.Second).Format(time.RFC3339)+`"`)}
				rev := t.Rev()
				p := ev.Continue(from, t, changes, true)
				from = rev
				if len(p.Firings) != 0 {
					b.Fatalf("a converged cluster fired %d rules on a clock tick: first %s", len(p.Firings), p.Firings[0].Rule)
				}
			}
			reportWork(b, before, ev.Stats())
		})
	}
}

// BenchmarkResync is the engine's resync at rest (engine.Config.ResyncInterval),
// without etcd: in a converged cluster, every rule evaluated whole, the
// round's bounds aside, which must plan nothing: the incremental rounds
// that converged it missed no binding. Its time is how long a resync
// holds the round loop.
func BenchmarkResync(b *testing.B) {
	rs := loadDefault(b)
	for _, sz := range []struct{ nodes, services, instances int }{{100, 10, 1000}, {1000, 100, 10000}} {
		b.Run(fmt.Sprintf("nodes=%d/instances=%d", sz.nodes, sz.instances), func(b *testing.B) {
			t, ev, _ := convergedWorld(b, rs, sz.nodes, sz.services, sz.instances)
			before := ev.Stats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if p := ev.Resync(t); len(p.Firings) != 0 {
					b.Fatalf("a resync of a converged cluster planned %d firings: first %s %v", len(p.Firings), p.Firings[0].Rule, p.Firings[0].Writes)
				}
			}
			reportWork(b, before, ev.Stats())
		})
	}
}

// BenchmarkNodeFailure is the engine's part of `ccattler bench`'s recovery
// phase, without etcd: in a converged cluster, 1% of the nodes lose their
// lease; the clock moves on past the failure policy's grace; the rounds run
// until the replacements are placed. The agents' reports are left out.
func BenchmarkNodeFailure(b *testing.B) {
	rs := loadDefault(b)
	for _, sz := range []struct{ nodes, services, instances int }{{100, 10, 1000}, {1000, 100, 10000}} {
		b.Run(fmt.Sprintf("nodes=%d/instances=%d", sz.nodes, sz.instances), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				t, ev, from := convergedWorld(b, rs, sz.nodes, sz.services, sz.instances)
				at := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
				tick := func(d time.Duration) facts.Change {
					return putFact(t, facts.Clock(), `"`+at.Add(d).Format(time.RFC3339)+`"`)
				}
				run := func(changes []facts.Change) int { return fixpoint(b, t, ev, &from, changes, 20) }
				var lost []facts.Change
				for n := 1; n <= sz.nodes/100; n++ {
					lost = append(lost, mutate(t, mutation{facts.Lease(fmt.Sprintf("node-%d", n)), ""}))
				}
				run(append(lost, tick(time.Second)))
				b.StartTimer()
				if run([]facts.Change{tick(20 * time.Second)}) == 0 {
					b.Fatal("nothing replaced")
				}
			}
		})
	}
}
