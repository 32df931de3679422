package policies_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// BenchmarkSummaries is what the summaries cost the engine, without etcd:
// the default policies with and without them, converging the medium bench's
// cluster (1,000 nodes, 100 services, 10,000 instances: intents resolved,
// instances created and placed, agents reporting them running and healthy)
// and then one instance's health flipping. With them, every service's
// summary must count its instances once converged.
func BenchmarkSummaries(b *testing.B) {
	all := loadDefault(b)
	const nodes, services, instances = 1000, 100, 10000
	for _, set := range []struct {
		name      string
		summaries bool
	}{{"rules", false}, {"rules+summaries", true}} {
		rs := all
		if !set.summaries {
			rs = all.WithoutSummaries()
		}
		b.Run("converge/"+set.name, func(b *testing.B) {
			var rounds time.Duration
			var st eval.Stats // the evaluator's counts: what the time is, on a loaded machine
			n := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				runtime.GC()
				b.StartTimer()
				t, ev, _, took := converge(b, rs, nodes, services, instances)
				n += len(took)
				for _, d := range took {
					rounds += d
				}
				b.StopTimer()
				checkSummaries(b, t, set.summaries, services, instances/services)
				s := ev.Stats()
				st.Tasks, st.Evals, st.FactsVisited, st.Aggregates, st.Firings = st.Tasks+s.Tasks, st.Evals+s.Evals, st.FactsVisited+s.FactsVisited, st.Aggregates+s.Aggregates, st.Firings+s.Firings
				b.StartTimer()
			}
			b.ReportMetric(float64(n)/float64(b.N), "rounds/op")
			b.ReportMetric(rounds.Seconds()/float64(b.N), "s-in-rounds/op")
			for _, m := range []struct {
				n    int64
				unit string
			}{{st.Tasks, "tasks/op"}, {st.Evals, "evals/op"}, {st.FactsVisited, "facts/op"}, {st.Aggregates, "aggregates/op"}, {st.Firings, "firings/op"}} {
				b.ReportMetric(float64(m.n)/float64(b.N), m.unit)
			}
		})
		b.Run("health-change/"+set.name, func(b *testing.B) {
			t, ev, from := convergedWorld(b, rs, nodes, services, instances)
			var ids []string
			t.Prefix("placement/instance/", func(f facts.Fact) bool {
				ids = append(ids, strings.TrimPrefix(f.Key, "placement/instance/"))
				return true
			})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				health := `"unhealthy"`
				if i%2 == 1 {
					health = `"healthy"`
				}
				fixpoint(b, t, ev, &from, []facts.Change{putFact(t, facts.InstanceHealth(ids[(i/2*7919)%len(ids)]), health)}, 10)
			}
		})
	}
}

// checkSummaries fails unless every service's summary counts per instances
// running, healthy and updated (or, without summaries, none exists).
func checkSummaries(b *testing.B, t *facts.Table, want bool, services, per int) {
	b.Helper()
	for i := 1; i <= services; i++ {
		f, ok := t.Get(facts.ServiceSummary(fmt.Sprintf("svc-%05d", i)))
		if !want {
			if ok {
				b.Fatalf("%s written without summaries", f.Key)
			}
			continue
		}
		var c struct{ Running, Healthy, Updated, Target int }
		if !ok || json.Unmarshal(f.Value, &c) != nil || c.Running != per || c.Healthy != per || c.Updated != per || c.Target != per {
			b.Fatalf("svc-%05d: summary %s (present %v), want %d of each", i, f.Value, ok, per)
		}
	}
}
