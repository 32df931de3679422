package eval_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
)

// stopRules stops extras of a service: pick and order are filled in.
const stopRules = `
rule "stop_extras" {
  doc       = "Stop the extras of a service."
  principal = "reconcile"
  match {
    want = "effective/service/{svc}/instances"
  }
  aggregate "placed" {
    match {
      svc  = "observed/instance/{i}/service"
      node = "placement/instance/{i}"
    }
    count = true
    %s
  }
  when = "placed > want"
  choose "victim" {
    match {
      svc    = "observed/instance/{v}/service"
      vnode  = "placement/instance/{v}"
      vstate = "observed/instance/{v}/state"
    }
    optional {
      vhealth  = "observed/instance/{v}/health"
      vstarted = "observed/instance/{v}/started_at"
    }
    filters {
      live = "vstate != 'failed'"
    }
    %s
  }
  delete "placement/instance/{v}" {}
}
`

// stopWorld puts service web with want instances wanted and n placed ones,
// a0000..: the i-th started at minute i, every third unhealthy, a0001 failed.
func stopWorld(tb *table, want, n int) {
	tb.put("effective/service/web/instances", fmt.Sprint(want))
	for i := range n {
		id := fmt.Sprintf("a%04d", i)
		state, health := "running", "healthy"
		if i%3 == 0 {
			health = "unhealthy"
		}
		if i == 1 {
			state = "failed"
		}
		tb.put("observed/instance/"+id+"/service", `"web"`)
		tb.put("observed/instance/"+id+"/state", `"`+state+`"`)
		tb.put("observed/instance/"+id+"/health", `"`+health+`"`)
		tb.put("observed/instance/"+id+"/started_at", fmt.Sprintf(`"2026-11-29T10:%02d:00Z"`, i))
		tb.put("placement/instance/"+id, `"node-1"`)
	}
}

func stopped(p eval.Plan) []string {
	var out []string
	for _, f := range p.Firings {
		out = append(out, f.Bindings["v"])
	}
	return out
}

func TestChoosePicksTheFirstKByOrder(t *testing.T) {
	rs := loadSrc(t, fmt.Sprintf(stopRules, "", `
    order = [desc("vhealth.orValue('unknown') != 'healthy'"), desc("vstarted.orValue(timestamp('1970-01-01T00:00:00Z'))")]
    pick  = "placed - want"`))
	tb := newTable()
	stopWorld(tb, 3, 10)
	p := eval.New(rs).Full(tb)
	if len(p.Problems) > 0 {
		t.Fatal(p.Problems)
	}
	// placed counts the failed a0001 too: 10 - 3 = 7 picks among the 9
	// live candidates, the unhealthy (a9, a6, a3, a0) newest first, then
	// the newest healthy (a8, a7, a5).
	want := []string{"a0009", "a0006", "a0003", "a0000", "a0008", "a0007", "a0005"}
	if got := stopped(p); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stopped %v, want %v (in this order: one firing per pick, best first)", got, want)
	}
	for _, f := range p.Firings {
		if len(f.Writes) != 1 || f.Writes[0].Key != "placement/instance/"+f.Bindings["v"] {
			t.Fatalf("a firing per pick, each deleting its own placement: %+v", f)
		}
	}
}

func TestChooseOrderAscendingAndTieBreak(t *testing.T) {
	// Ascending by health alone: false (healthy) first; among equals the
	// candidate variables decide, smallest first, as for a score.
	rs := loadSrc(t, fmt.Sprintf(stopRules, "", `
    order = ["vhealth.orValue('unknown') != 'healthy'"]
    pick  = "3"`))
	tb := newTable()
	stopWorld(tb, 1, 8)
	got := stopped(eval.New(rs).Full(tb))
	want := []string{"a0002", "a0004", "a0005"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("stopped %v, want %v", got, want)
	}
}

func TestChoosePickBounds(t *testing.T) {
	for _, tc := range []struct {
		pick     string
		n        int
		problem  string
		stopping int
	}{
		{pick: "0", stopping: 0},
		{pick: "1", stopping: 1},
		{pick: "100", stopping: 4}, // more than there are: every live candidate
		{pick: "want - placed", problem: "is -4; expected how many candidates to pick, 0 or more"},
		{pick: "dyn('two')", problem: "expected an int"},
	} {
		t.Run(tc.pick, func(t *testing.T) {
			rs := loadSrc(t, fmt.Sprintf(stopRules, "", `pick = "`+tc.pick+`"`))
			tb := newTable()
			stopWorld(tb, 1, 5)
			p := eval.New(rs).Full(tb)
			if tc.problem != "" {
				if len(p.Problems) != 1 || !strings.Contains(p.Problems[0].Error(), tc.problem) || !strings.Contains(p.Problems[0].Error(), "svc=web") {
					t.Fatalf("want one problem naming the binding and %q, got %v", tc.problem, p.Problems)
				}
				if len(p.Firings) != 0 {
					t.Fatalf("a bad pick fires nothing: %v", stopped(p))
				}
				return
			}
			if len(p.Problems) > 0 {
				t.Fatal(p.Problems)
			}
			if got := len(p.Firings); got != tc.stopping {
				t.Fatalf("pick %s: %d firings, want %d", tc.pick, got, tc.stopping)
			}
		})
	}
}

func TestChooseOrderKeysOfDifferentTypesAreAProblem(t *testing.T) {
	rs := loadSrc(t, fmt.Sprintf(stopRules, "", `
    order = ["vhealth.orValue('') == 'healthy' ? dyn(1) : dyn('x')"]
    pick  = "2"`))
	tb := newTable()
	stopWorld(tb, 1, 4)
	p := eval.New(rs).Full(tb)
	if len(p.Problems) != 1 || !strings.Contains(p.Problems[0].Error(), "order") {
		t.Fatalf("want a problem naming the order, got %v", p.Problems)
	}
	if len(p.Firings) != 0 {
		t.Fatalf("no pick when the order cannot rank: %v", stopped(p))
	}
}

func TestGuardedAggregateMembersAreGuardedReads(t *testing.T) {
	rs := loadSrc(t, fmt.Sprintf(stopRules, "guard = true", `pick = "placed - want"`))
	tb := newTable()
	stopWorld(tb, 2, 4)
	p := eval.New(rs).Full(tb)
	if len(p.Firings) != 2 {
		t.Fatalf("firings %v", stopped(p))
	}
	for _, f := range p.Firings {
		if f.AfterAll {
			t.Fatalf("4 members fit the limit: compared, not ordered after the plan: %+v", f)
		}
		var members []string
		for _, r := range f.Reads {
			if strings.HasPrefix(r.Key, "observed/instance/") && strings.HasSuffix(r.Key, "/service") {
				if r.NoGuard || r.Rev == 0 {
					t.Fatalf("a guarded member is compared at its revision: %+v", r)
				}
				members = append(members, r.Key)
			}
		}
		sort.Strings(members)
		if len(members) != 4 {
			t.Fatalf("every member counted is read by every stop: %v", members)
		}
	}
	// Unguarded, the same members are listed but not compared.
	rs = loadSrc(t, fmt.Sprintf(stopRules, "", `pick = "placed - want"`))
	for _, f := range eval.New(rs).Full(tb).Firings {
		for _, r := range f.Reads {
			if strings.HasPrefix(r.Key, "observed/instance/") && strings.HasSuffix(r.Key, "/service") && r.Key != "observed/instance/"+f.Bindings["v"]+"/service" && !r.NoGuard {
				t.Fatalf("an unguarded aggregate's member is compared: %+v", r)
			}
		}
	}
}

func TestGuardedAggregateCountsTheRoundsOwnWrites(t *testing.T) {
	// place puts a pending instance on node-1 in the same round the stop
	// rule counts it: the stop reads that placement as Own.
	place := `
rule "place" {
  doc       = "Place pending instances."
  principal = "scheduler"
  match {
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  emit "placement/instance/{id}" {
    value = "'node-1'"
  }
}
`
	stop := strings.Replace(fmt.Sprintf(stopRules, "guard = true", `pick = "placed - want"`), `principal = "reconcile"`, `principal = "reconcile"
  after     = ["place"]`, 1)
	rs := loadSrc(t, place+stop)
	tb := newTable()
	stopWorld(tb, 2, 3)
	tb.put("observed/instance/b0001/service", `"web"`)
	tb.put("observed/instance/b0001/state", `"pending"`)
	p := eval.New(rs).Full(tb)
	var stops int
	for _, f := range p.Firings {
		if f.Rule != "stop_extras" {
			continue
		}
		stops++
		own := false
		for _, r := range f.Reads {
			own = own || (r.Key == "placement/instance/b0001" && r.Own && !r.NoGuard)
		}
		if !own && f.Bindings["v"] != "b0001" {
			t.Fatalf("a stop counted the round's own placement of b0001 without depending on it: %+v", f.Reads)
		}
	}
	if stops != 2 {
		t.Fatalf("4 placed, 2 wanted: %d stops", stops)
	}
}

func TestGuardedAggregateOverTheLimitOrdersAfterThePlan(t *testing.T) {
	rs := loadSrc(t, fmt.Sprintf(stopRules, "guard = true", `pick = "placed - want"`))
	tb := newTable()
	stopWorld(tb, 2, 12)
	p := eval.New(rs, eval.WithMaxGuardedReads(10)).Full(tb)
	if len(p.Firings) != 10 { // 12 - 2, of the 11 live candidates
		t.Fatalf("firings %v", stopped(p))
	}
	for _, f := range p.Firings {
		if !f.AfterAll {
			t.Fatalf("12 members over a limit of 10 facts: the stop must wait for the whole plan: %+v", f)
		}
		for _, r := range f.Reads {
			if strings.HasSuffix(r.Key, "/service") && r.Key != "observed/instance/"+f.Bindings["v"]+"/service" && !r.NoGuard {
				t.Fatalf("past the limit members are not compared: %+v", r)
			}
		}
	}
}
