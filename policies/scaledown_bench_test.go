package policies_test

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// packedWorld is convergedWorld on a few large nodes, sized as `ccattler
// bench --nodes N` sizes them (twice the share of the instances' CPU and
// memory each): the world `--scale-to` scales back.
func packedWorld(b *testing.B, rs *rules.RuleSet, nodes, services, instances int, opts ...eval.Option) (*facts.Table, *eval.Evaluator, int64) {
	b.Helper()
	perNode := float64(instances) / float64(nodes)
	cpu := math.Max(4, math.Ceil(2*perNode*0.1))
	mem := max(int64(8)<<30, int64(math.Ceil(2*perNode))*(64<<20))
	t := applyWorld(b, nodes, services, instances)
	for i := 1; i <= nodes; i++ {
		id := fmt.Sprintf("node-%d", i)
		t.Put(facts.Fact{Key: facts.NodeCapacityCPU(id), Value: []byte(strconv.FormatFloat(cpu, 'f', -1, 64)), ModRevision: 1, CreateRevision: 1})
		t.Put(facts.Fact{Key: facts.NodeCapacityMemory(id), Value: []byte(fmt.Sprintf(`"%dMi"`, mem>>20)), ModRevision: 1, CreateRevision: 1})
	}
	t, ev, from, _ := convergeWorld(b, t, rs, opts...)
	return t, ev, from
}

// reportStopped is what the agents report once they stop the containers
// whose placements changes deleted: stopped, health unknown.
func reportStopped(t *facts.Table, changes []facts.Change) []facts.Change {
	var out []facts.Change
	for _, c := range changes {
		if !c.Deleted || !strings.HasPrefix(c.Key, "placement/instance/") {
			continue
		}
		id := strings.TrimPrefix(c.Key, "placement/instance/")
		out = append(out, putFact(t, facts.InstanceState(id), `"stopped"`), putFact(t, facts.InstanceHealth(id), `"unknown"`))
	}
	return out
}

// BenchmarkScaleDown is the engine's part of `ccattler bench --nodes 3
// --scale-to 3`, without etcd: every service of a converged cluster on
// three nodes is scaled to 3, and rounds run under the server's firing
// and cost budgets (the time budget left out, so that the rounds do not
// depend on the machine's load), the agents reporting each stop between
// two rounds and the clock moving a second a round, until every extra
// instance is stopped, its endpoint withdrawn and its stop noted. Then the
// clock moves on an hour and rounds run until every stopped instance's
// facts are collected (gc.hcl's collect_stopped): the collect-* figures.
func BenchmarkScaleDown(b *testing.B) {
	rs := loadDefault(b)
	cfg := engine.NewConfig()
	for _, sz := range []struct{ services, instances int }{{10, 10000}, {10, 30000}} {
		b.Run(fmt.Sprintf("nodes=3/instances=%d", sz.instances), func(b *testing.B) {
			var rounds, firings int
			var took, cpu, tick time.Duration
			var recounted int64
			byRule := map[string]int{}
			var collectRounds int
			var collectTook, collectCPU time.Duration
			collected := map[string]int{}
			var collectWork eval.Stats
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				t, ev, from := packedWorld(b, rs, 3, sz.services, sz.instances,
					eval.WithMaxFirings(cfg.RoundFirings), eval.WithRoundBudget(cfg.RoundCost, 0))
				var changes []facts.Change
				for s := 1; s <= sz.services; s++ {
					name := fmt.Sprintf("svc-%05d", s)
					changes = append(changes, putFact(t, facts.ServiceInstances(name), "3"), putFact(t, facts.Intent("user", name), "3"))
				}
				at := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
				was := ev.Stats()
				b.StartTimer()
				more := false
				for r := 0; len(changes) > 0 || more; r++ {
					// The server's clock moves on while a round this large
					// is evaluated and committed: about a second a round.
					at = at.Add(time.Second)
					changes = append(changes, putFact(t, facts.Clock(), `"`+at.Format(time.RFC3339)+`"`))
					if r == 200 {
						b.Fatal("no fixpoint after 200 rounds")
					}
					rev := t.Rev()
					start, cpu0 := time.Now(), processCPU()
					p := ev.Continue(from, t, changes, false)
					took, cpu = took+time.Since(start), cpu+processCPU()-cpu0
					from, more = rev, p.More
					rounds++
					firings += len(p.Firings)
					for _, f := range p.Firings {
						byRule[f.Rule]++
					}
					changes = applyPlan(t, p)
					changes = append(changes, reportStopped(t, changes)...)
				}
				b.StopTimer()
				recounted += ev.Stats().Aggregates - was.Aggregates
				checkScaledDown(b, t, sz.services, 3)
				// Once scaled back, a second passing: what the stopped
				// instances cost while their facts are kept (an hour).
				at = at.Add(time.Second)
				rev := t.Rev()
				clock := []facts.Change{putFact(t, facts.Clock(), `"`+at.Format(time.RFC3339)+`"`)}
				start := time.Now()
				if p := ev.Continue(from, t, clock, false); len(p.Firings) > 0 || p.More {
					b.Fatalf("a second passing fired %d rules (more %v)", len(p.Firings), p.More)
				}
				tick += time.Since(start)
				from = rev
				// An hour later: every stopped instance's facts collected.
				at = at.Add(time.Hour)
				changes = []facts.Change{putFact(t, facts.Clock(), `"`+at.Format(time.RFC3339)+`"`)}
				before := ev.Stats()
				start, cpu0 := time.Now(), processCPU()
				for r := 0; len(changes) > 0 || more; r++ {
					if r == 200 {
						b.Fatal("no fixpoint after 200 rounds of collection")
					}
					rev := t.Rev()
					p := ev.Continue(from, t, changes, false)
					from, more = rev, p.More
					collectRounds++
					for _, f := range p.Firings {
						collected[f.Rule]++
					}
					changes = applyPlan(t, p)
				}
				collectTook, collectCPU = collectTook+time.Since(start), collectCPU+processCPU()-cpu0
				after := ev.Stats()
				collectWork.Tasks += after.Tasks - before.Tasks
				collectWork.Evals += after.Evals - before.Evals
				collectWork.FactsVisited += after.FactsVisited - before.FactsVisited
				collectWork.Adjustments += after.Adjustments - before.Adjustments
				collectWork.Aggregates += after.Aggregates - before.Aggregates
				checkCollected(b, t, sz.services, 3)
			}
			b.ReportMetric(float64(rounds)/float64(b.N), "rounds/op")
			b.ReportMetric(float64(firings)/float64(b.N), "firings/op")
			b.ReportMetric(took.Seconds()/float64(b.N), "s-in-rounds/op")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s-in-rounds/op")
			b.ReportMetric(took.Seconds()*1e6/float64(firings), "µs/firing")
			b.ReportMetric(tick.Seconds()*1e3/float64(b.N), "ms/idle-tick")
			// Aggregate groups computed rather than served kept: a
			// service's counts recounted in the rounds that read them.
			b.ReportMetric(float64(recounted)/float64(b.N), "aggregates/op")
			b.ReportMetric(float64(collectRounds)/float64(b.N), "collect-rounds/op")
			b.ReportMetric(collectTook.Seconds()/float64(b.N), "collect-s/op")
			b.ReportMetric(collectCPU.Seconds()/float64(b.N), "collect-cpu-s/op")
			per := float64(b.N * collected["collect_stopped"])
			b.Logf("collection an hour later, firings by rule: %v; a collected instance: %.1f tasks, %.1f CEL evaluations, %.1f facts visited, %.1f aggregate adjustments, %.2f aggregates computed",
				collected, float64(collectWork.Tasks)/per, float64(collectWork.Evals)/per, float64(collectWork.FactsVisited)/per, float64(collectWork.Adjustments)/per, float64(collectWork.Aggregates)/per)
			rulesFired := make([]string, 0, len(byRule))
			for r, n := range byRule {
				rulesFired = append(rulesFired, fmt.Sprintf("%s=%d", r, n/b.N))
			}
			slices.Sort(rulesFired)
			b.Logf("firings by rule: %s", strings.Join(rulesFired, " "))
		})
	}
}

// checkScaledDown fails b unless each of services services has exactly n
// placements, each with its endpoint, and every other instance is stopped
// with its stop noted.
func checkScaledDown(b *testing.B, t *facts.Table, services, n int) {
	b.Helper()
	placed := map[string]int{}
	t.Prefix("observed/instance/", func(f facts.Fact) bool {
		rest := strings.TrimPrefix(f.Key, "observed/instance/")
		id, attr, _ := strings.Cut(rest, "/")
		if attr != "service" {
			return true
		}
		svc, _ := facts.StringValue(f.Value)
		_, isPlaced := t.Get(facts.Placement(id))
		_, hasEndpoint := t.Get("endpoint/service/" + svc + "/" + id)
		_, noted := t.Get(facts.InstanceStoppedAt(id))
		switch {
		case isPlaced && hasEndpoint:
			placed[svc]++
		case isPlaced:
			b.Fatalf("instance %s of %s is placed without an endpoint", id, svc)
		case hasEndpoint || !noted:
			b.Fatalf("instance %s of %s: placement gone, endpoint %v, stop noted %v", id, svc, hasEndpoint, noted)
		}
		return true
	})
	if len(placed) != services {
		b.Fatalf("%d services placed, want %d: %v", len(placed), services, placed)
	}
	for svc, c := range placed {
		if c != n {
			b.Fatalf("%s has %d placed, want %d", svc, c, n)
		}
	}
}

// processCPU is the CPU time the process has used: the rounds' own, on a
// machine whose other load stretches their wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// checkCollected fails b unless every fact left under observed/instance/
// is of a placed instance, and each of services services has n of them.
func checkCollected(b *testing.B, t *facts.Table, services, n int) {
	b.Helper()
	left := map[string]int{}
	t.Prefix("observed/instance/", func(f facts.Fact) bool {
		id, attr, _ := strings.Cut(strings.TrimPrefix(f.Key, "observed/instance/"), "/")
		if _, placed := t.Get(facts.Placement(id)); !placed {
			b.Fatalf("%s: the instance stopped over an hour ago and its facts are not all collected", f.Key)
		}
		if attr == "service" {
			svc, _ := facts.StringValue(f.Value)
			left[svc]++
		}
		return true
	})
	if len(left) != services {
		b.Fatalf("%d services have instances left, want %d", len(left), services)
	}
	for svc, c := range left {
		if c != n {
			b.Fatalf("%s has %d instances left, want %d", svc, c, n)
		}
	}
}
