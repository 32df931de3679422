package eval_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// waitingRules wait for the clock as the built-in policies do: one counts
// from a stamp with an aggregate beside it (collect_stopped), one from a
// per-service threshold read through optionals (retire_unhealthy).
const waitingRules = `
rule "collect" {
  doc       = "A stopped instance is marked collected an hour on, or once its service has two newer failures."
  principal = "gc"
  match {
    stopped = "observed/instance/{id}/stopped_at"
    svc     = "observed/instance/{id}/service"
    clock   = "observed/clock"
  }
  absent   = ["observed/instance/{id}/reason"]
  optional { failed = "observed/instance/{id}/failed_at" }
  aggregate "newer" {
    match {
      isvc    = "observed/instance/{i}/service"
      ifailed = "observed/instance/{i}/failed_at"
    }
    where = "isvc == svc && failed.hasValue() && ifailed > failed.value()"
    count = true
  }
  when = "clock - stopped > duration('1h') || (failed.hasValue() && newer >= 2)"
  emit "observed/instance/{id}/reason" { value = "'collected'" }
}

rule "retire" {
  doc       = "An instance unhealthy for its service's failures × interval is retiring."
  principal = "failure"
  match {
    since = "observed/instance/{id}/unhealthy_since"
    svc   = "observed/instance/{id}/service"
    clock = "observed/clock"
  }
  absent = ["observed/instance/{id}/retiring"]
  optional {
    failures = "desired/service/{svc}/health/failures"
    interval = "desired/service/{svc}/health/interval"
  }
  when = "(clock - since).getMilliseconds() >= (failures.orValue(3) - 1) * interval.orValue(duration('10s')).getMilliseconds()"
  emit "observed/instance/{id}/retiring" { value = "'unhealthy'" }
}
`

func stamp(t time.Time) string { return `"` + t.UTC().Format(time.RFC3339Nano) + `"` }

// TestDeadlinesMissNothing: under random clock moves (from a fraction of
// a second to hours, now and then backwards), instances stopping, failing
// and turning unhealthy, thresholds edited and plans dropped, evaluated
// incrementally, a fresh evaluator's full round of the same facts finds
// nothing left to fire after every step: no binding's deadline came late.
func TestDeadlinesMissNothing(t *testing.T) {
	rs := loadSrc(t, waitingRules)
	steps := []time.Duration{300 * time.Millisecond, time.Second, time.Second, 5 * time.Second, time.Minute, 20 * time.Minute, 2 * time.Hour}
	fired, due := 0, int64(0)
	for seed := uint64(0); seed < 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		ev := eval.New(rs)
		tb := newTable()
		now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
		tb.put(facts.Clock(), stamp(now))
		from := tb.rev
		ev.Full(tb)
		next := 0
		inst := func() string { return fmt.Sprintf("a%04x", r.IntN(max(next, 1))) }
		for step := range 120 {
			var changes []facts.Change
			for range 1 + r.IntN(4) {
				switch op := r.IntN(10); {
				case op < 4:
					d := steps[r.IntN(len(steps))]
					if r.IntN(20) == 0 {
						d = -d // a new leader's clock a little behind
					}
					now = now.Add(d)
					changes = append(changes, putKnown(tb, facts.Clock(), stamp(now)))
				case op < 6:
					id := fmt.Sprintf("a%04x", next)
					next++
					svc := fmt.Sprintf("s%d", r.IntN(3))
					changes = append(changes, putKnown(tb, "observed/instance/"+id+"/service", `"`+svc+`"`))
					at := now.Add(-time.Duration(r.IntN(7200)) * time.Second)
					if r.IntN(2) == 0 {
						changes = append(changes, putKnown(tb, "observed/instance/"+id+"/stopped_at", stamp(at)))
					} else {
						changes = append(changes, putKnown(tb, "observed/instance/"+id+"/unhealthy_since", stamp(at)))
					}
				case op < 7:
					changes = append(changes, putKnown(tb, "observed/instance/"+inst()+"/failed_at", stamp(now.Add(-time.Duration(r.IntN(600))*time.Second))))
				case op < 8:
					svc := fmt.Sprintf("s%d", r.IntN(3))
					if r.IntN(2) == 0 {
						changes = append(changes, putKnown(tb, "desired/service/"+svc+"/health/interval", fmt.Sprintf(`"%ds"`, 1+r.IntN(120))))
					} else {
						changes = append(changes, putKnown(tb, "desired/service/"+svc+"/health/failures", fmt.Sprint(1+r.IntN(5))))
					}
				case op < 9:
					for _, k := range []string{"reason", "retiring"} {
						key := "observed/instance/" + inst() + "/" + k
						if old, ok := tb.Get(key); ok {
							tb.rev++
							tb.Delete(key)
							tb.SetRev(tb.rev)
							changes = append(changes, facts.Change{Fact: facts.Fact{Key: key, ModRevision: tb.rev}, Deleted: true, Prev: old.Value, PrevKnown: true})
						}
					}
				default:
					changes = append(changes, putKnown(tb, "observed/instance/"+inst()+"/unhealthy_since", stamp(now.Add(-time.Duration(r.IntN(300))*time.Second))))
				}
			}
			p := ev.Continue(from, tb, changes, false)
			from = tb.rev
			if len(p.Firings) > 0 && r.IntN(8) == 0 {
				// The plan does not commit: the engine says so and
				// evaluates what its firings read again.
				ev.Uncommitted()
				p = ev.Incremental(tb, readAgain(tb, p))
			}
			fired += len(p.Firings)
			for _, f := range p.Firings {
				for _, w := range f.Writes {
					putKnown(tb, w.Key, string(w.Value))
				}
			}
			// The writes come back as the next step's changes would.
			p = ev.Continue(from, tb, nil, false)
			from = tb.rev
			if fresh := eval.New(rs).Full(tb); len(fresh.Firings) > 0 {
				f := fresh.Firings[0]
				t.Fatalf("seed %d step %d (clock %s): a fresh round fires %d, first %s %v: a deadline came late", seed, step, now.Format(time.TimeOnly), len(fresh.Firings), f.Rule, f.Bindings)
			}
		}
		due += ev.Stats().Due
	}
	// The walk exercises what it checks: bindings fire, and clock moves
	// make bindings due rather than evaluate the rules whole.
	if fired < 500 || due < 500 {
		t.Fatalf("%d firings, %d bindings made due by the clock over the walk; want hundreds of each", fired, due)
	}
}

// TestClockMoveEvaluatesOnlyDueBindings: with a thousand instances
// stopped at different times, a clock move evaluates the few whose hour
// has passed, not all of them, and collects exactly those.
func TestClockMoveEvaluatesOnlyDueBindings(t *testing.T) {
	ev := eval.New(loadSrc(t, waitingRules))
	tb := newTable()
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tb.put(facts.Clock(), stamp(start))
	const n = 1000
	for i := range n {
		id := fmt.Sprintf("a%04x", i)
		tb.put("observed/instance/"+id+"/service", `"web"`)
		tb.put("observed/instance/"+id+"/stopped_at", stamp(start.Add(time.Duration(i)*time.Second)))
	}
	from := tb.rev
	if p := ev.Full(tb); len(p.Firings) != 0 {
		t.Fatalf("%d firings before any hour passed", len(p.Firings))
	}
	for sec := 1; sec <= 3; sec++ {
		c := putKnown(tb, facts.Clock(), stamp(start.Add(time.Hour+time.Duration(sec)*time.Second)))
		before := ev.Stats()
		p := ev.Continue(from, tb, []facts.Change{c}, false)
		from = tb.rev
		// Instances stopped at 0..sec-1 s are over the hour (strictly).
		want := sec
		if sec > 1 {
			want = 1 // the earlier ones were collected in the moves before
		}
		if len(p.Firings) != want {
			t.Fatalf("clock at 1h+%ds: %d collected, want %d", sec, len(p.Firings), want)
		}
		after := ev.Stats()
		if tasks := after.Tasks - before.Tasks; tasks > 3 {
			t.Fatalf("clock at 1h+%ds: %d tasks for %d instances; want the due ones only", sec, tasks, n)
		}
		for _, f := range p.Firings {
			putKnown(tb, f.Writes[0].Key, string(f.Writes[0].Value))
		}
		ev.Continue(from, tb, nil, false)
		from = tb.rev
	}
	if got := ev.Stats().Due; got < 3 {
		t.Fatalf("%d bindings made due by the clock; want at least 3", got)
	}
}
