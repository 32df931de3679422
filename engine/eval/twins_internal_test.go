package eval

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// twinRules has counts that are twins: the same match patterns and
// group, each its own where, value hints (pending, running) and optional
// patterns (none; the health; the image, under the same name h), and a
// rule that writes them.
const twinRules = `
relation "placed_inst" {
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
    node  = "placement/instance/{id}"
  }
}

counts {
  params  = ["svc"]
  over    = "placed_inst"
  pending = "state == 'pending'"
  running = "state == 'running'"
}

counts {
  params  = ["svc"]
  over    = "placed_inst"
  optional { h = "observed/instance/{id}/health" }
  healthy = "state == 'running' && h.orValue('unknown') == 'healthy'"
}

counts {
  params  = ["svc"]
  over    = "placed_inst"
  optional { h = "observed/instance/{id}/image" }
  current = "h.orValue('') == 'img:2'"
}

summary "counted" {
  doc       = "The pending, running and healthy placed instances of a service."
  principal = "instances"
  match { service = "desired/service/{svc}" }
  derive "observed/service/{svc}/summary" {
    value = "{'running': running, 'healthy': healthy, 'updated': pending, 'target': current}"
  }
}
`

// Twins are adjusted by one join per changed fact, each counting the
// members its own where and optional facts let through: round after round
// of random changes to the instances' services, states, health and
// placements, the plans are those of an evaluator without any kept or
// cached aggregate.
func TestTwinsCountTheirOwnMembers(t *testing.T) {
	rs, diags := rules.LoadFiles(map[string][]byte{"twins.hcl": []byte(twinRules)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if ev := New(rs); !hasTwins(ev, facts.Placement("0000a"), "pending", "running", "healthy", "current") {
		t.Fatal("pending, running, healthy and current are not adjusted as twins for a placement")
	}
	var adjusted int64
	for seed := uint64(0); seed < 30; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		with := New(rs, WithSeed(seed), WithMaxAggregateReads(1<<20))
		without := New(rs, WithSeed(seed), WithoutAggregateCache(), WithMaxAggregateReads(1<<20))
		tw, to := facts.NewTable(nil), facts.NewTable(nil)
		var rev int64
		// put writes both tables alike and returns the change to the first.
		put := func(key, value string) []facts.Change {
			rev++
			var out []facts.Change
			for i, tb := range []*facts.Table{tw, to} {
				var c facts.Change
				ok := true
				if old, had := tb.Get(key); had {
					c.Prev = old.Value
				}
				c.PrevKnown = true // as the mirror reports a watch event: the store adjusts kept results
				if value == "" {
					c.Fact, ok = tb.Delete(key)
					c.Deleted = true
				} else {
					c.Fact = facts.Fact{Key: key, Value: []byte(value), ModRevision: rev, CreateRevision: rev}
					if old, had := tb.Get(key); had {
						c.Fact.CreateRevision = old.CreateRevision
					}
					tb.Put(c.Fact)
				}
				tb.SetRev(rev)
				if ok && i == 0 {
					out = append(out, c)
				}
			}
			return out
		}
		for s := range 2 {
			put(facts.DesiredService(fmt.Sprintf("svc-%d", s)), `{}`)
		}
		change := func() []facts.Change {
			id := fmt.Sprintf("%05x", r.IntN(12))
			switch r.IntN(6) {
			case 0:
				return put(facts.InstanceService(id), fmt.Sprintf(`"svc-%d"`, r.IntN(2)))
			case 1:
				return put(facts.InstanceState(id), []string{`"pending"`, `"running"`, `"failed"`, ``}[r.IntN(4)])
			case 2:
				return put(facts.InstanceHealth(id), []string{`"healthy"`, `"unhealthy"`, ``}[r.IntN(3)])
			case 3:
				return put(facts.InstanceImage(id), []string{`"img:1"`, `"img:2"`, ``}[r.IntN(3)])
			default:
				return put(facts.Placement(id), []string{`"node-1"`, `"node-2"`, ``}[r.IntN(3)])
			}
		}
		for range 20 {
			change()
		}
		pw, po := with.Full(tw), without.Full(to)
		for step := 0; ; step++ {
			if !reflect.DeepEqual(readsSorted(pw.Firings), readsSorted(po.Firings)) {
				t.Fatalf("seed %d step %d: plans differ\nkept and adjusted: %+v\ncomputed:          %+v", seed, step, pw.Firings, po.Firings)
			}
			if step == 40 {
				break
			}
			from := tw.Rev()
			var changes []facts.Change
			for _, f := range pw.Firings {
				for _, w := range f.Writes {
					changes = append(changes, put(w.Key, string(w.Value))...)
				}
			}
			for range 1 + r.IntN(3) {
				changes = append(changes, change()...)
			}
			pw, po = with.Continue(from, tw, changes, false), without.Continue(from, to, changes, false)
		}
		adjusted += with.Stats().AggregateHits
	}
	if adjusted == 0 {
		t.Error("no kept or adjusted result was ever used")
	}
}

// readsSorted is ruletest.ReadsSorted: a kept result lists its members in
// the order they were adjusted, a computed one in the join's.
func readsSorted(fs []Firing) []Firing {
	out := make([]Firing, len(fs))
	for i, f := range fs {
		f.Reads = slices.Clone(f.Reads)
		slices.SortFunc(f.Reads, func(a, b Read) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		out[i] = f
	}
	return out
}

// hasTwins reports whether a fact of key is adjusted for the named
// aggregates in one group (maintainSites).
func hasTwins(ev *Evaluator, key string, names ...string) bool {
	kt, err := ev.rs.Schema.KeyType(key)
	if err != nil {
		return false
	}
	for _, g := range ev.aggs.sites[kt] {
		in := map[string]bool{}
		for _, s := range g.sites {
			in[s.ag.Name] = true
		}
		all := true
		for _, n := range names {
			all = all && in[n]
		}
		if all {
			return true
		}
	}
	return false
}
