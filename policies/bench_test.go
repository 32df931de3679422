package policies_test

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/ccattler/ccattler/policies"
	"github.com/ccattler/ccattler/rules"
)

func loadDefault(tb testing.TB) *rules.RuleSet {
	tb.Helper()
	files := map[string][]byte{}
	names, _ := fs.Glob(policies.Files, "*.hcl")
	for _, n := range names {
		b, _ := fs.ReadFile(policies.Files, n)
		files[n] = b
	}
	rs, diags := rules.LoadFiles(files)
	if diags.HasErrors() {
		tb.Fatalf("the default policies do not load:\n%s", diags.Error())
	}
	return rs
}

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
		put(facts.Lease(id), `{}`)
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
	doc, diags := spec.Decode(spec.Source{Name: "bench.hcl", Bytes: []byte(src.String())})
	if diags.HasErrors() {
		tb.Fatal(diags.Error())
	}
	for _, f := range doc.Facts() {
		put(f.Key, string(f.Value))
	}
	return t
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
					changes = append(changes, facts.Change{Fact: old, Deleted: true})
				}
				continue
			}
			cr := rev
			if old, ok := t.Get(w.Key); ok {
				cr = old.CreateRevision
			}
			nf := facts.Fact{Key: w.Key, Value: w.Value, ModRevision: rev, CreateRevision: cr}
			t.Put(nf)
			changes = append(changes, facts.Change{Fact: nf})
		}
	}
	return changes
}
