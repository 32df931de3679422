package eval_test

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
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/ccattler/ccattler/policies"
	"github.com/ccattler/ccattler/rules"
)

// changeKnown writes key (value "": deletes it) and returns the change as
// the mirror reports it, with the value before.
func changeKnown(tb *table, key, value string) facts.Change {
	if value != "" {
		return putKnown(tb, key, value)
	}
	tb.rev++
	old, _ := tb.Delete(key)
	tb.SetRev(tb.rev)
	return facts.Change{Fact: old, Deleted: true, PrevKnown: true, Prev: old.Value}
}

// TestKeptAggregatesFollowReportBatches: the default policies' counts kept
// across rounds are adjusted for batches of changes as agents write them —
// several facts of one instance at once (its first report: state, node,
// health, image), a key changed twice in one batch, a fact deleted — and
// every round's plan is the one an evaluator without kept results makes,
// which computes twenty times the groups. The plans commit as a leader's
// do, mostly whole, and the results the round adjusted for its own writes
// are kept when they come back (aggown.go); but a plan is also lost, or
// commits all but one firing (another writer having placed its instance
// elsewhere, or deleted a fact it wrote), or a written key is deleted
// again in the batch its write came back in: results advanced for every
// change then, or for the others.
func TestKeptAggregatesFollowReportBatches(t *testing.T) {
	rs, diags := rules.LoadFiles(policies.Sources())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var keptGroups, allGroups, ownKept, ownLost int64
	for seed := uint64(0); seed < 12; seed++ {
		r := rand.New(rand.NewPCG(seed, 19))
		now := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
		clock := eval.WithClock(func() time.Time { return now })
		with := eval.New(rs, eval.WithSeed(seed), clock, eval.WithMaxAggregateReads(1<<20))
		without := eval.New(rs, eval.WithSeed(seed), clock, eval.WithoutAggregateCache(), eval.WithMaxAggregateReads(1<<20))
		tw, to := newTable(), newTable()
		both := func(key, value string) (facts.Change, facts.Change) {
			return changeKnown(tw, key, value), changeKnown(to, key, value)
		}
		for n := range 4 {
			node := fmt.Sprintf("node-%d", n)
			for _, kv := range [][2]string{{facts.NodeState(node), `"alive"`}, {facts.NodeCapacityCPU(node), `64`},
				{facts.NodeCapacityMemory(node), `"100000Gi"`}, {facts.NodeArchitecture(node), `"amd64"`},
				{facts.NodeZone(node), `"zone-1"`}, {facts.Lease(node), `{}`}} {
				both(kv[0], kv[1])
			}
		}
		both(facts.Clock(), `"2026-11-29T21:00:00Z"`)
		var src strings.Builder
		for s := range 3 {
			fmt.Fprintf(&src, "service \"svc-%d\" {\n  image = \"img:1\"\n  instances = %d\n  resources {\n    cpu = 0.5\n    memory = \"64Mi\"\n  }\n}\n", s, 3+r.IntN(5))
		}
		doc, diags := spec.Decode(spec.Source{Name: "batch.hcl", Bytes: []byte(src.String())})
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		for _, f := range doc.Facts() {
			both(f.Key, string(f.Value))
		}
		from := tw.Rev()
		pw, po := with.Full(tw), without.Full(to)
		w0, o0 := with.Stats().Aggregates, without.Stats().Aggregates
		for step := range 14 {
			if !reflect.DeepEqual(ruletest.ReadsSorted(pw.Firings), ruletest.ReadsSorted(po.Firings)) || !reflect.DeepEqual(pw.Rejections, po.Rejections) {
				t.Fatalf("seed %d step %d: plans differ\nkept results: %+v\nnone kept:    %+v", seed, step, pw.Firings, po.Firings)
			}
			var cw, co []facts.Change
			add := func(key, value string) {
				w, o := both(key, value)
				cw, co = append(cw, w), append(co, o)
			}
			commit := pw.Firings // the plan commits
			switch r.IntN(8) {
			case 0:
				commit = nil // lost
			case 1, 2:
				// All but one firing; another writer got to a key it
				// writes first: a placement elsewhere, or a fact deleted.
				if len(commit) == 0 {
					break
				}
				i := r.IntN(len(commit))
				for j, f := range commit {
					if len(f.Writes) > 0 && strings.HasPrefix(f.Writes[0].Key, "placement/instance/") {
						i = j
						break
					}
				}
				lost := commit[i]
				commit = append(commit[:i:i], commit[i+1:]...)
				for _, w := range lost.Writes[:min(len(lost.Writes), 1)] {
					if strings.HasPrefix(w.Key, "placement/instance/") {
						add(w.Key, map[bool]string{true: `"node-0"`, false: `"node-1"`}[string(w.Value) != `"node-0"`])
					} else if _, ok := tw.Get(w.Key); ok {
						add(w.Key, "")
					}
				}
			}
			var written []string
			for _, f := range commit {
				for _, w := range f.Writes {
					add(w.Key, string(w.Value))
					if w.Value != nil {
						written = append(written, w.Key)
					}
				}
			}
			if len(written) > 0 && r.IntN(6) == 0 {
				add(written[r.IntN(len(written))], "") // another writer deletes one again
			}
			// The agents report in one batch: a placed instance's facts at
			// once, some twice, an instance's health gone.
			for _, id := range instanceIDs(tw) {
				p, placed := tw.Get(facts.Placement(id))
				if !placed || r.IntN(3) == 0 {
					continue
				}
				node := string(p.Value)
				switch r.IntN(4) {
				case 0:
					add(facts.InstanceState(id), `"running"`)
					add(facts.InstanceNode(id), node)
					add(facts.InstanceHealth(id), `"healthy"`)
					add(facts.InstanceImage(id), `"img:1"`)
				case 1:
					add(facts.InstanceHealth(id), `"unhealthy"`)
					add(facts.InstanceHealth(id), []string{`"healthy"`, `"unhealthy"`}[r.IntN(2)])
				case 2:
					if _, ok := tw.Get(facts.InstanceHealth(id)); ok {
						add(facts.InstanceHealth(id), "")
					}
				default:
					add(facts.InstanceImage(id), `"img:0"`)
					add(facts.InstanceState(id), `"running"`)
				}
			}
			rev := tw.Rev()
			pw, po = with.Continue(from, tw, cw, false), without.Continue(from, to, co, false)
			from = rev
		}
		keptGroups += with.Stats().Aggregates - w0
		allGroups += without.Stats().Aggregates - o0
		ownKept += with.Stats().OwnKept
		ownLost += with.Stats().OwnLost
	}
	t.Logf("groups computed after the first round: %d keeping results, %d without; a round's writes kept adjusted %d times, lost %d", keptGroups, allGroups, ownKept, ownLost)
	if ownKept == 0 || ownLost == 0 {
		t.Errorf("own writes kept %d times, lost %d: want both", ownKept, ownLost)
	}
	// Adjusted, the kept counts leave a twentieth to compute again; dropped
	// at every batch (WithMaxAdjust(0)), the round's cache alone leaves
	// two fifths.
	if keptGroups*8 > allGroups {
		t.Errorf("keeping results computed %d groups after the first round, %d without: the kept ones were not adjusted", keptGroups, allGroups)
	}
}

// instanceIDs lists the instances tb holds, in key order.
func instanceIDs(tb *table) []string {
	var ids []string
	tb.Prefix("observed/instance/", func(f facts.Fact) bool {
		if parts := facts.SplitKey(nil, f.Key); len(parts) == 4 && parts[3] == "service" {
			ids = append(ids, parts[2])
		}
		return true
	})
	return ids
}
