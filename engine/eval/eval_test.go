package eval_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

func loadSrc(t testing.TB, src string, opts ...rules.Option) *rules.RuleSet {
	t.Helper()
	rs, diags := rules.LoadFiles(map[string][]byte{"r.hcl": []byte(src)}, opts...)
	if diags.HasErrors() {
		t.Fatalf("load: %s", diags.Error())
	}
	return rs
}

// table is a facts.Table with a revision counter.
type table struct {
	*facts.Table
	rev int64
}

func newTable() *table { return &table{Table: facts.NewTable(nil)} }

func (tb *table) put(key, value string) facts.Change {
	tb.rev++
	f := facts.Fact{Key: key, Value: []byte(value), ModRevision: tb.rev, CreateRevision: tb.rev}
	if strings.HasPrefix(key, "lease/") {
		f.Lease = 1 // an agent's lease: held on a live etcd lease
	}
	if old, ok := tb.Get(key); ok {
		f.CreateRevision = old.CreateRevision // an update, as etcd reports it
	}
	tb.Put(f)
	tb.SetRev(tb.rev)
	return facts.Change{Fact: f}
}

// apply writes a plan's writes and returns them as changes.
func (tb *table) apply(p eval.Plan) []facts.Change {
	var out []facts.Change
	for _, f := range p.Firings {
		for _, w := range f.Writes {
			if w.Value == nil {
				tb.rev++
				old, _ := tb.Delete(w.Key)
				out = append(out, facts.Change{Fact: old, Deleted: true})
				continue
			}
			out = append(out, tb.put(w.Key, string(w.Value)))
		}
	}
	return out
}

const endpointRule = `rule "publish_endpoint" {
  doc       = "An endpoint per running instance and exposed port."
  principal = "network"
  match {
    svc    = "observed/instance/{id}/service"
    state  = "observed/instance/{id}/state"
    ip     = "observed/instance/{id}/ip"
    expose = "desired/service/{svc}/expose/{port}"
  }
  when = "state == 'running'"
  derive "endpoint/service/{svc}/{id}" {
    value = "{'ip': ip, 'port': int(port)}"
  }
}
`

// fill builds n services of 3 running instances each.
func fill(tb *table, n int) {
	for s := 0; s < n; s++ {
		svc := fmt.Sprintf("svc-%d", s)
		tb.put(facts.ServiceExpose(svc, 8080), "{}")
		for i := 0; i < 3; i++ {
			id := fmt.Sprintf("%05x", s*3+i)
			tb.put(facts.InstanceService(id), `"`+svc+`"`)
			tb.put(facts.InstanceState(id), `"running"`)
			tb.put(facts.InstanceIP(id), `"10.0.0.1"`)
		}
	}
}

// TestIncrementalTouchesOnlyAffected: after a full evaluation, one changed
// fact costs the same work whatever the number of facts.
func TestIncrementalTouchesOnlyAffected(t *testing.T) {
	var visited []int64
	for _, n := range []int{10, 1000} {
		rs := loadSrc(t, endpointRule)
		tb := newTable()
		fill(tb, n)
		ev := eval.New(rs)
		p := ev.Full(tb)
		if len(p.Firings) != 3*n {
			t.Fatalf("n=%d: full evaluation fired %d times, want %d", n, len(p.Firings), 3*n)
		}
		tb.apply(p)
		before := ev.Stats()
		ch := tb.put(facts.InstanceState("00004"), `"stopped"`)
		p = ev.Incremental(tb, []facts.Change{ch})
		after := ev.Stats()
		if len(p.Firings) != 1 || p.Firings[0].Writes[0].Key != "endpoint/service/svc-1/00004" || p.Firings[0].Writes[0].Value != nil {
			t.Fatalf("n=%d: plan %+v, want the one endpoint deleted", n, p.Firings)
		}
		if d := after.Tasks - before.Tasks; d != 1 {
			t.Errorf("n=%d: %d tasks for one change, want 1", n, d)
		}
		if d := after.TypeScans - before.TypeScans; d != 0 {
			t.Errorf("n=%d: %d whole-type scans for one change, want 0", n, d)
		}
		visited = append(visited, after.FactsVisited-before.FactsVisited)
	}
	if visited[0] != visited[1] || visited[0] > 10 {
		t.Errorf("facts visited for one change: %d with 30 instances, %d with 3000: want equal and small", visited[0], visited[1])
	}
}

// TestReadFlags checks what the committer guards: read-your-writes marked
// Own, aggregate members NoGuard, fresh keys and absences Rev 0, an
// existential absence as a prefix.
func TestReadFlags(t *testing.T) {
	src := `rule "place" {
  doc       = "Place pending instances on node-1 while it has fewer than 10."
  principal = "scheduler"
  match {
    st = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}", "endpoint/service/web/{any}"]
  aggregate "n" {
    match {
      node = "placement/instance/{other}"
    }
    where = "node == 'node-1'"
    count = true
  }
  when = "st == 'pending' && n < 10"
  emit "placement/instance/{id}" {
    value = "'node-1'"
  }
}
rule "spawn" {
  doc       = "One fresh instance per service asking for one."
  principal = "instances"
  match {
    want = "desired/service/{name}/instances"
  }
  fresh "id" {}
  emit "observed/instance/{id}/service" {
    value = "name"
  }
}
`
	rs := loadSrc(t, src)
	tb := newTable()
	tb.put(facts.InstanceState("a0001"), `"pending"`)
	tb.put(facts.InstanceState("a0002"), `"pending"`)
	tb.put(facts.ServiceInstances("web"), `1`)
	p := eval.New(rs, eval.WithSeed(3)).Full(tb)
	var place []eval.Firing
	var spawn *eval.Firing
	for i, f := range p.Firings {
		switch f.Rule {
		case "place":
			place = append(place, f)
		case "spawn":
			spawn = &p.Firings[i]
		}
	}
	if len(place) != 2 || spawn == nil {
		t.Fatalf("firings %+v", p.Firings)
	}
	has := func(f eval.Firing, want eval.Read) bool {
		for _, r := range f.Reads {
			if r == want {
				return true
			}
		}
		return false
	}
	for _, want := range []eval.Read{
		{Key: "observed/instance/a0001/state", Rev: 1},
		{Key: "placement/instance/a0001", Rev: 0},
		{Key: "endpoint/service/web/", Prefix: true},
	} {
		if !has(place[0], want) {
			t.Errorf("first placement reads %+v; want %+v", place[0].Reads, want)
		}
	}
	// The second placement counted the first one's write: read as Own,
	// and not guarded, as an aggregate member.
	if !has(place[1], eval.Read{Key: "placement/instance/a0001", Own: true, NoGuard: true}) {
		t.Errorf("second placement reads %+v; want the first's placement as Own, NoGuard", place[1].Reads)
	}
	key := spawn.Writes[0].Key
	if !strings.HasPrefix(key, "observed/instance/") || !has(*spawn, eval.Read{Key: key, Rev: 0}) {
		t.Errorf("fresh firing writes %s, reads %+v: want its new key read with Rev 0", key, spawn.Reads)
	}
}

func TestProblems(t *testing.T) {
	fine := `rule "fine" {
  doc       = "Always fires."
  principal = "scheduler"
  match {
    s = "observed/instance/{id}/state"
  }
  emit "placement/instance/{id}" {
    value = "'node-1'"
  }
}
`
	t.Run("over the CEL cost budget", func(t *testing.T) {
		rs := loadSrc(t, fine+`rule "costly" {
  doc       = "A guard far over a small budget."
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  when = "[1,2,3,4,5,6,7,8,9,10].map(x, [1,2,3,4,5,6,7,8,9,10].map(y, x * y)).size() > n"
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`, rules.WithCostLimit(50))
		tb := newTable()
		tb.put(facts.Intent("user", "web"), "3")
		tb.put(facts.InstanceState("a0001"), `"pending"`)
		p := eval.New(rs).Full(tb)
		if len(p.Problems) != 1 || p.Problems[0].Rule != "costly" || !strings.Contains(p.Problems[0].Err.Error(), "cost budget") {
			t.Errorf("problems %v: want costly over its budget", p.Problems)
		}
		if len(p.Firings) != 1 || p.Firings[0].Rule != "fine" {
			t.Errorf("firings %+v: want fine to fire", p.Firings)
		}
	})
	t.Run("a value too large for the untracked program is evaluated with tracking", func(t *testing.T) {
		// Within the limit for any string up to rules.FastSize bytes (CEL
		// charges a fraction of a unit per byte searched), so the guard has
		// an untracked program; a far larger string must still be charged.
		// An image may be at most facts.MaxImageBytes, so the large string
		// is a JSON fact's, which only facts.MaxValueBytes bounds.
		rs := loadSrc(t, `rule "search" {
  doc       = "A guard whose cost grows with the string's length."
  principal = "intent-resolver"
  match {
    img = "auth/{name}/rules"
  }
  when = "!img.contains('zzz')"
  derive "effective/service/{name}/instances" {
    value = "1"
  }
}
`, rules.WithCostLimit(10_000))
		r, _ := rs.Rule("search")
		if r.When.Fast == nil {
			t.Fatal("the guard has no untracked program: nothing to test")
		}
		tb := newTable()
		tb.put(facts.AuthRules("user:small"), `"nginx:1.28"`)
		tb.put(facts.AuthRules("user:huge"), `"`+strings.Repeat("a", facts.MaxValueBytes-2)+`"`)
		p := eval.New(rs).Full(tb)
		if len(p.Problems) != 1 || !strings.Contains(p.Problems[0].Err.Error(), "cost budget") {
			t.Errorf("problems %v firings %d: want the huge image over the budget", p.Problems, len(p.Firings))
		}
	})
	t.Run("a panic is recovered with the rule's name", func(t *testing.T) {
		rs := loadSrc(t, fine+`rule "broken" {
  doc       = "Its head is sabotaged below."
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
`)
		r, _ := rs.Rule("broken")
		r.Heads[0].Type = nil // a programmer mistake the evaluator trips on
		tb := newTable()
		tb.put(facts.Intent("user", "web"), "3")
		tb.put(facts.InstanceState("a0001"), `"pending"`)
		p := eval.New(rs).Full(tb)
		if len(p.Problems) != 1 || p.Problems[0].Rule != "broken" || !strings.Contains(p.Problems[0].Err.Error(), "panic") {
			t.Errorf("problems %v: want broken's panic", p.Problems)
		}
		if len(p.Firings) != 1 || p.Firings[0].Rule != "fine" {
			t.Errorf("firings %+v: want fine to fire", p.Firings)
		}
	})
	t.Run("a rule flipping its own key", func(t *testing.T) {
		rs := loadSrc(t, `rule "flip" {
  doc       = "Flips a node between alive and draining."
  principal = "failure"
  match {
    s = "observed/node/{n}/state"
  }
  emit "observed/node/{n}/state" {
    value = "s == 'alive' ? 'draining' : 'alive'"
  }
}
`)
		tb := newTable()
		tb.put(facts.NodeState("node-1"), `"alive"`)
		p := eval.New(rs).Full(tb)
		if len(p.Firings) != 0 || len(p.Problems) == 0 || p.Problems[0].Rule != "flip" || !strings.Contains(p.Problems[0].Err.Error(), "oscillation") {
			t.Errorf("firings %+v problems %v: want flip stopped, nothing written", p.Firings, p.Problems)
		}
	})
}

// TestDeterministic: the same facts and seed give the same plan.
func TestDeterministic(t *testing.T) {
	rs, diags := rules.Load("testdata/aggregate")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	plan := func() string {
		tb := newTable()
		tb.put(facts.Intent("user", "web"), "5")
		tb.put(facts.Intent("user", "db"), "2")
		p := eval.New(rs, eval.WithSeed(42)).Full(tb)
		return fmt.Sprintf("%+v", p.Firings)
	}
	if a, b := plan(), plan(); a != b {
		t.Errorf("two runs differ:\n%s\n%s", a, b)
	}
}

// TestValueHint: `when = "state == 'pending'"` lets the scheduler find the
// pending instances by value; the running ones are never visited.
func TestValueHint(t *testing.T) {
	rs, diags := rules.Load("testdata/choice")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tb := newTable()
	tb.put(facts.NodeState("node-1"), `"alive"`)
	tb.put(facts.NodeCapacityCPU("node-1"), `100`)
	for i := 0; i < 1000; i++ {
		id := fmt.Sprintf("%05x", i)
		tb.put(facts.InstanceService(id), `"web"`)
		tb.put(facts.InstanceState(id), `"running"`)
	}
	tb.put(facts.InstanceService("fffff"), `"web"`)
	tb.put(facts.InstanceState("fffff"), `"pending"`)
	ev := eval.New(rs)
	p := ev.Full(tb)
	if len(p.Firings) != 1 || p.Firings[0].Writes[0].Key != "placement/instance/fffff" {
		t.Fatalf("firings %+v problems %v", p.Firings, p.Problems)
	}
	if v := ev.Stats().FactsVisited; v > 20 {
		t.Errorf("visited %d facts to place one pending instance among 1000 running: want the value index used", v)
	}
}

// TestValueHintDisjunction: `state == 'stopped' || state == 'failed'` finds
// the stopped and failed instances by value; a disjunction with a side that
// says nothing of the alias does not.
func TestValueHintDisjunction(t *testing.T) {
	for _, tc := range []struct {
		when    string
		indexed bool
	}{
		{"state == 'stopped' || state == 'failed'", true},
		{"state in ['stopped'] || (state == 'failed' && id != '')", true},
		{"state == 'stopped' || id == 'fffff'", false},
	} {
		rs := loadSrc(t, `rule "stamp" {
  doc       = "Stopped or failed instances are stamped."
  principal = "gc"
  match {
    state = "observed/instance/{id}/state"
  }
  absent = ["observed/instance/{id}/stopped_at"]
  when   = "`+tc.when+`"
  emit "observed/instance/{id}/stopped_at" {
    value = "'2026-11-29T00:00:00Z'"
  }
}
`)
		tb := newTable()
		for i := 0; i < 1000; i++ {
			tb.put(facts.InstanceState(fmt.Sprintf("%05x", i)), `"running"`)
		}
		tb.put(facts.InstanceState("ffffe"), `"stopped"`)
		tb.put(facts.InstanceState("fffff"), `"failed"`)
		ev := eval.New(rs)
		p := ev.Full(tb)
		if n := len(p.Firings); n != 2 && tc.indexed || n < 1 {
			t.Fatalf("%s: %d firings %v", tc.when, n, p.Problems)
		}
		if v := ev.Stats().FactsVisited; (v <= 20) != tc.indexed {
			t.Errorf("%s: visited %d facts, want the value index used: %v", tc.when, v, tc.indexed)
		}
	}
}

// TestDeterministicDeletes: a view losing many keys deletes them in the same
// order every time (the indexes themselves visit in no particular order).
func TestDeterministicDeletes(t *testing.T) {
	rs := loadSrc(t, endpointRule)
	plan := func() string {
		tb := newTable()
		fill(tb, 20)
		ev := eval.New(rs)
		tb.apply(ev.Full(tb))
		tb.rev++
		old, _ := tb.Delete(facts.ServiceExpose("svc-3", 8080))
		p := ev.Incremental(tb, []facts.Change{{Fact: old, Deleted: true}})
		tb.rev++
		old, _ = tb.Delete(facts.ServiceExpose("svc-7", 8080))
		q := ev.Full(tb)
		return fmt.Sprintf("%+v\n%+v", p.Firings, q.Firings)
	}
	first := plan()
	for i := 0; i < 5; i++ {
		if again := plan(); again != first {
			t.Fatalf("plans differ:\n%s\n%s", first, again)
		}
	}
	if !strings.Contains(first, "endpoint/service/svc-3/") || !strings.Contains(first, "endpoint/service/svc-7/") {
		t.Errorf("no deletes in %s", first)
	}
}

// TestTick: a guard on now becomes true with time alone; Tick finds it.
func TestTick(t *testing.T) {
	rs := loadSrc(t, endpointRule+`rule "gc_stopped" {
  doc       = "Facts of an instance stopped for over an hour go."
  principal = "gc"
  match {
    state   = "observed/instance/{id}/state"
    started = "observed/instance/{id}/started_at"
  }
  when = "state == 'stopped' && now - started > duration('1h')"
  delete "observed/instance/{id}/started_at" {}
}
`)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ev := eval.New(rs, eval.WithClock(func() time.Time { return now }))
	if got := ev.TimedRules(); len(got) != 1 || got[0] != "gc_stopped" {
		t.Fatalf("timed rules %v", got)
	}
	tb := newTable()
	tb.put(facts.InstanceState("a0001"), `"stopped"`)
	tb.put(facts.InstanceStartedAt("a0001"), `"2026-11-29T11:30:00Z"`)
	if p := ev.Full(tb); len(p.Firings) != 0 {
		t.Fatalf("fired too early: %+v", p.Firings)
	}
	now = now.Add(time.Hour)
	before, needless := ev.Stats().Tasks, ev.Stats().Needless
	p := ev.Tick(tb)
	if len(p.Firings) != 1 || p.Firings[0].Writes[0].Key != facts.InstanceStartedAt("a0001") {
		t.Fatalf("tick an hour later: %+v %v", p.Firings, p.Problems)
	}
	// The timed rule; its own delete dispatches that binding again, a
	// task known needless (started_at is gone) and not run; the endpoint
	// rule is not evaluated.
	if d := ev.Stats().Tasks - before; d != 1 {
		t.Errorf("tick ran %d tasks; want 1, of the timed rule only", d)
	}
	if d := ev.Stats().Needless - needless; d != 1 {
		t.Errorf("tick found %d tasks needless; want 1, the timed rule's under the binding it deleted from", d)
	}
}

// TestTimedRules: a rule is timed when time passing can change what it
// does — a condition or a derived value reads now — not when an action only
// stamps now into what it writes.
func TestTimedRules(t *testing.T) {
	rs := loadSrc(t, `rule "stamp" {
  doc       = "Failed instances are stamped with the time first seen failed."
  principal = "failure"
  match {
    state = "observed/instance/{id}/state"
  }
  absent = ["observed/instance/{id}/failed_at"]
  when   = "state == 'failed'"
  emit "observed/instance/{id}/failed_at" {
    value = "now"
  }
}

rule "expire" {
  doc       = "Failed instances are forgotten after an hour."
  principal = "gc"
  after     = ["stamp"]
  match {
    at = "observed/instance/{id}/failed_at"
  }
  when = "now - at > duration('1h')"
  delete "observed/instance/{id}/failed_at" {}
}
`)
	if got := eval.New(rs).TimedRules(); !reflect.DeepEqual(got, []string{"expire"}) {
		t.Errorf("timed rules %v, want [expire]", got)
	}
}

// TestJoinStartsFromARareType: a rule over failed instances, evaluated
// whole, starts its join from the few failed_at facts — a scan of their
// type visits fewer facts than going through every service's instances —
// wherever the pattern stands in the file, with no condition on a value to
// look them up by; and it still finds every one.
func TestJoinStartsFromARareType(t *testing.T) {
	rs := loadSrc(t, `
rule "release" {
  doc       = "A failed instance loses its placement."
  principal = "reconcile"
  match {
    image  = "desired/service/{svc}/image"
    svc    = "observed/instance/{id}/service"
    node   = "placement/instance/{id}"
    failed = "observed/instance/{id}/failed_at"
  }
  when = "node != ''"
  delete "placement/instance/{id}" {}
}
`)
	for _, failed := range []int{0, 3} {
		tb := newTable()
		for s := range 20 {
			svc := fmt.Sprintf("svc-%02d", s)
			tb.put(facts.ServiceImage(svc), `"img:1"`)
			for i := range 50 {
				id := fmt.Sprintf("%02x%03x", s, i)
				tb.put(facts.InstanceService(id), `"`+svc+`"`)
				state := "running"
				if s*50+i < failed {
					state = "failed"
					tb.put(facts.InstanceFailedAt(id), `"2026-12-05T09:00:00Z"`)
				}
				tb.put(facts.InstanceState(id), `"`+state+`"`)
				tb.put(facts.Placement(id), `"node-1"`)
			}
		}
		ev := eval.New(rs)
		p := ev.Full(tb)
		if len(p.Firings) != failed {
			t.Fatalf("%d failed: %d firings %+v, problems %v", failed, len(p.Firings), p.Firings, p.Problems)
		}
		if v, most := ev.Stats().FactsVisited, int64(20+10*failed); v > most {
			t.Errorf("%d failed of 1,000: visited %d facts, want at most %d: the join did not start from the failed", failed, v, most)
		}
	}
}
