package eval_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/policies"
	"github.com/ccattler/ccattler/rules"
)

// passRules places pending instances with filters that fail on some nodes,
// read an aggregate only on some (room), end in a line comment (alive), and
// fail at run time on one node (sane: an integer division by zero).
const passRules = `
rule "place" {
  doc       = "Place each pending instance on a node that passes every filter, emptiest first."
  principal = "scheduler"
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match {
      nstate  = "observed/node/{node}/state"
      cap_cpu = "observed/node/{node}/capacity/cpu"
      cap_mem = "observed/node/{node}/capacity/memory"
    }
    optional {
      nzone = "observed/node/{node}/zone"
    }
    aggregate "here" {
      match {
        node = "placement/instance/{j}"
      }
      count = true
    }
    filters {
      alive = "nstate == 'alive' // the others are drained or gone"
      zone  = "nzone.orValue('') != 'zone-x'"
      room  = "nzone.hasValue() ? here < int(cap_cpu) : true"
      sane  = "1000 / cap_mem >= 0"
    }
    score = "-double(here)"
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`

// passWorld puts nodes that each fail a different filter, or none, and
// pending instances; with broken, one alive node's memory is 0.
func passWorld(tb *table, broken bool) {
	for i := range 12 {
		node := fmt.Sprintf("node-%02d", i)
		state, zone, mem := "alive", fmt.Sprintf(`"zone-%d"`, i%3), `"1000"`
		switch i % 4 {
		case 1:
			state = "draining"
		case 2:
			zone = `"zone-x"`
		}
		tb.put("observed/node/"+node+"/state", `"`+state+`"`)
		tb.put("observed/node/"+node+"/capacity/cpu", fmt.Sprint(2+i%3))
		tb.put("observed/node/"+node+"/capacity/memory", mem)
		if i != 7 {
			tb.put("observed/node/"+node+"/zone", zone)
		}
	}
	if broken {
		tb.put("observed/node/node-11/capacity/memory", `"0"`)
	}
	for i := range 20 {
		id := fmt.Sprintf("b%04d", i)
		tb.put("observed/instance/"+id+"/service", `"web"`)
		tb.put("observed/instance/"+id+"/state", `"pending"`)
	}
}

// TestFilterConjunctionDecidesAsEachFilter: a choice tries every filter's
// conjunction first (rules.Choice.Pass) and evaluates the filters one by one
// only when it does not hold. The plans — placements, the reads each
// records, every rejection with the filters it names, and the problem a
// failing filter reports — are those of the same rules evaluated filter by
// filter, round after round as the nodes fill; and the conjunction saves
// evaluations.
func TestFilterConjunctionDecidesAsEachFilter(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("broken=%v", broken), func(t *testing.T) {
			with := loadSrc(t, passRules)
			without := loadSrc(t, passRules)
			ch := with.Rules[0].Choose
			if ch.Pass == nil {
				t.Fatal("no conjunction compiled for four filters")
			}
			if !strings.Contains(ch.Pass.Src, "// the others") {
				t.Fatalf("conjunction %q lost a filter's text", ch.Pass.Src)
			}
			without.Rules[0].Choose.Pass = nil
			ew, eo := eval.New(with, eval.WithSeed(1)), eval.New(without, eval.WithSeed(1))
			tw, to := newTable(), newTable()
			passWorld(tw, broken)
			passWorld(to, broken)
			pw, po := ew.Full(tw), eo.Full(to)
			for round := 0; ; round++ {
				if !reflect.DeepEqual(ruletest.ReadsSorted(pw.Firings), ruletest.ReadsSorted(po.Firings)) {
					t.Fatalf("round %d: firings differ\nwith the conjunction: %+v\nfilter by filter:     %+v", round, pw.Firings, po.Firings)
				}
				if !reflect.DeepEqual(pw.Rejections, po.Rejections) {
					t.Fatalf("round %d: rejections differ\nwith the conjunction: %+v\nfilter by filter:     %+v", round, pw.Rejections, po.Rejections)
				}
				if fmt.Sprint(pw.Problems) != fmt.Sprint(po.Problems) {
					t.Fatalf("round %d: problems differ\nwith the conjunction: %v\nfilter by filter:     %v", round, pw.Problems, po.Problems)
				}
				if broken != (len(pw.Problems) > 0) {
					t.Fatalf("round %d: problems %v, want them only with the node whose memory is 0", round, pw.Problems)
				}
				if len(pw.Firings) == 0 {
					break
				}
				if round == 0 && len(pw.Rejections) == 0 && !broken {
					t.Fatal("no candidate was rejected: the world tries no filter")
				}
				pw, po = ew.Incremental(tw, tw.apply(pw)), eo.Incremental(to, to.apply(po))
			}
			if !broken && ew.Stats().Evals >= eo.Stats().Evals {
				t.Fatalf("%d evaluations with the conjunction, %d filter by filter: it saved none", ew.Stats().Evals, eo.Stats().Evals)
			}
		})
	}
}

// TestDefaultSchedulerHasAConjunction: the default scheduler's eight
// filters are tried as one expression, and a choice with one filter has no
// conjunction to try.
func TestDefaultSchedulerHasAConjunction(t *testing.T) {
	rs, diags := rules.LoadFiles(policies.Sources())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	found := false
	for _, r := range rs.Rules {
		ch := r.Choose
		if ch == nil {
			continue
		}
		if (ch.Pass != nil) != (len(ch.Filters) > 1) {
			t.Errorf("rule %s: %d filters, conjunction %v", r.Name, len(ch.Filters), ch.Pass != nil)
		}
		if r.Name == "schedule" {
			found = true
			if ch.Pass == nil || len(ch.Filters) < 8 {
				t.Fatalf("schedule: %d filters, conjunction %v", len(ch.Filters), ch.Pass)
			}
		}
	}
	if !found {
		t.Fatal("no schedule rule in the default policies")
	}
}

// TestFilterConjunctionOnlyWithinTheCostLimit: filters that each fit the
// cost limit untracked (a Fast program) but whose conjunction's estimate
// does not are never joined — an untracked conjunction would escape the
// limit — and the choice decides filter by filter, naming every filter a
// node fails; under a limit both fit, they are joined, and decide alike.
func TestFilterConjunctionOnlyWithinTheCostLimit(t *testing.T) {
	const src = `
rule "place" {
  doc       = "Place each pending instance on a node not draining, outside zone x."
  principal = "scheduler"
  match {
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match {
      nstate = "observed/node/{node}/state"
      nzone  = "observed/node/{node}/zone"
    }
    filters {
      alive = "!nstate.contains('drain')"
      zone  = "!nzone.contains('x')"
    }
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`
	var plans []string
	for _, tc := range []struct {
		limit uint64
		pass  bool
	}{{3600, false}, {rules.DefaultCostLimit, true}} {
		rs := loadSrc(t, src, rules.WithCostLimit(tc.limit))
		ch := rs.Rules[0].Choose
		if ch.Filters[0].Expr.Fast == nil || ch.Filters[1].Expr.Fast == nil {
			t.Fatalf("limit %d: a filter has no untracked program: nothing to test", tc.limit)
		}
		if (ch.Pass != nil) != tc.pass {
			t.Fatalf("limit %d: conjunction %v, want %v", tc.limit, ch.Pass != nil, tc.pass)
		}
		tb := newTable()
		for node, v := range map[string][2]string{"node-1": {"draining", "zone-x"}, "node-2": {"alive", "zone-x"}, "node-3": {"alive", "zone-1"}} {
			tb.put("observed/node/"+node+"/state", `"`+v[0]+`"`)
			tb.put("observed/node/"+node+"/zone", `"`+v[1]+`"`)
		}
		tb.put("observed/instance/c0001/state", `"pending"`)
		p := eval.New(rs).Full(tb)
		if len(p.Firings) != 1 || p.Firings[0].Bindings["node"] != "node-3" || len(p.Problems) != 0 {
			t.Fatalf("limit %d: firings %+v problems %v: want c0001 on node-3", tc.limit, p.Firings, p.Problems)
		}
		plans = append(plans, fmt.Sprint(p.Rejections))
	}
	if !strings.Contains(plans[0], "alive zone") || plans[0] != plans[1] {
		t.Fatalf("rejections filter by filter %s, with the conjunction %s: want node-1 failing both, and the same", plans[0], plans[1])
	}
}
