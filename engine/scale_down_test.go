package engine

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/ccattler/ccattler/policies"
	"github.com/ccattler/ccattler/rules"
)

// defaultRules loads the embedded policies as the server does.
func defaultRules(t *testing.T) *rules.RuleSet {
	t.Helper()
	files := policies.Sources()
	if len(files) == 0 {
		t.Fatal("no policies are embedded")
	}
	rs, diags := rules.LoadFiles(files)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	return rs
}

// scaleWorld writes nodes alive with room for every instance (each with
// its lease, on one etcd lease kept alive), the clock, and services of
// per instances each, as `ccattler bench` applies them.
func scaleWorld(t *testing.T, v *env, nodes, services, per int) {
	t.Helper()
	id, err := v.store.Grant(v.ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ka, err := v.store.KeepAlive(v.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range ka { // drained until the test's context ends
		}
	}()
	var ops []facts.Op
	for i := 1; i <= nodes; i++ {
		n := fmt.Sprintf("node-%d", i)
		for k, val := range map[string]string{facts.NodeState(n): `"alive"`, facts.NodeCapacityCPU(n): `100000`,
			facts.NodeCapacityMemory(n): `"100000Gi"`, facts.NodeArchitecture(n): `"amd64"`, facts.NodeZone(n): `"zone-1"`,
			facts.NodeAddress(n): fmt.Sprintf(`"10.0.0.%d"`, i)} {
			ops = append(ops, facts.Put(k, []byte(val)))
		}
		ops = append(ops, facts.Op{Key: facts.Lease(n), Value: []byte(`{}`), Lease: id})
	}
	ops = append(ops, facts.Put(facts.Clock(), []byte(`"2026-11-29T21:00:00Z"`)))
	var src strings.Builder
	for i := 1; i <= services; i++ {
		fmt.Fprintf(&src, "service \"svc-%05d\" {\n  image = \"nginx:1.28\"\n  instances = %d\n  expose = [8080]\n  resources {\n    cpu = 0.1\n    memory = \"64Mi\"\n  }\n}\n", i, per)
	}
	doc, diags := spec.Decode(spec.Source{Name: "scale.hcl", Bytes: []byte(src.String())})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for _, f := range doc.Facts() {
		ops = append(ops, facts.Put(f.Key, f.Value))
	}
	v.commitAll(t, ops)
}

// commitAll commits ops in transactions etcd accepts.
func (v *env) commitAll(t *testing.T, ops []facts.Op) {
	t.Helper()
	for len(ops) > 0 {
		n := min(len(ops), 100)
		if _, err := v.store.Commit(v.ctx, facts.Txn{Ops: ops[:n]}); err != nil {
			t.Errorf("commit: %v", err)
			return
		}
		ops = ops[n:]
	}
}

// reports is what the agents would write now: every placed instance
// running and healthy on its node, every running one whose placement is
// gone stopped.
func reports(r facts.Reader) []facts.Op {
	var ops []facts.Op
	put := func(k, val string) {
		if f, ok := r.Get(k); !ok || string(f.Value) != val {
			ops = append(ops, facts.Put(k, []byte(val)))
		}
	}
	r.Prefix("placement/instance/", func(f facts.Fact) bool {
		id := strings.TrimPrefix(f.Key, "placement/instance/")
		n, _ := strconv.ParseUint(id, 16, 32) // the instance's own address: a fresh id is five hex digits
		put(facts.InstanceNode(id), string(f.Value))
		put(facts.InstanceState(id), `"running"`)
		put(facts.InstanceImage(id), `"nginx:1.28"`)
		put(facts.InstanceIP(id), fmt.Sprintf(`"10.1.%d.%d"`, n>>8&255, n&255))
		put(facts.InstanceHealth(id), `"healthy"`)
		put(facts.InstanceStartedAt(id), `"2026-11-29T21:00:01Z"`)
		return true
	})
	r.Prefix("observed/instance/", func(f facts.Fact) bool {
		if strings.HasSuffix(f.Key, "/state") && string(f.Value) == `"running"` {
			id := strings.Split(f.Key, "/")[2]
			if _, placed := r.Get(facts.Placement(id)); !placed {
				put(f.Key, `"stopped"`)
			}
		}
		return true
	})
	return ops
}

// actionsLeft is what a fresh evaluator's Full over the mirror's facts
// would do, views maintained (derives) or not: nothing, once the engine
// is done.
func actionsLeft(v *env, rs *rules.RuleSet, derives bool) []string {
	var left []string
	v.mirror.View(func(r facts.Reader) {
		for _, f := range eval.New(rs).Full(r).Firings {
			if derives || f.Kind != "derive" {
				left = append(left, fmt.Sprintf("%s %v", f.Rule, f.Bindings))
			}
		}
	})
	sort.Strings(left)
	return left
}

// placedBy counts placements by service.
func placedBy(r facts.Reader) map[string]int {
	out := map[string]int{}
	r.Prefix("placement/instance/", func(f facts.Fact) bool {
		sf, _ := r.Get(facts.InstanceService(strings.TrimPrefix(f.Key, "placement/instance/")))
		s, _ := facts.StringValue(sf.Value)
		out[s]++
		return true
	})
	return out
}

// Services of hundreds of instances on 3 nodes, scaled to 3 one apply
// after the other (as `ccattler bench --scale-to` does), while the
// engine's term ends twice in the middle of committing the stops and
// other writers make its transactions conflict (each conflict in a row
// halving the next), its rounds sliced by a firing budget and the
// evaluator's bounds lowered so that a few hundred instances cross them:
// every service ends with 3 placements, and a fresh evaluator's Full over
// the final facts has nothing left to do: no action, no view to change.
func TestScaleDownThroughTermEndsAndConflicts(t *testing.T) {
	const nodes, services = 3, 4
	per := 120
	if testing.Short() {
		per = 60
	}
	rs := defaultRules(t)
	v := envOnSchema(t, etcdtest.Start(t), rs.Schema)
	cfg := testConfig()
	var e *Engine // its Pending yields as the server's does; set before it runs
	opts := []eval.Option{eval.WithMaxFirings(per / 2), eval.WithYield(func() bool { return e.Pending() }), eval.WithMaxKeptReads(256), eval.WithMaxAbsentKeys(8)}
	e = v.engine(t, NewRuleSetEvaluator(rs, nil, opts...), cfg)

	// The agents: what the mirror shows placed is reported running,
	// what is no longer placed stopped.
	actx, stopAgents := context.WithCancel(v.ctx)
	var agents sync.WaitGroup
	agents.Add(1)
	go func() {
		defer agents.Done()
		for actx.Err() == nil {
			var ops []facts.Op
			v.mirror.View(func(r facts.Reader) { ops = reports(r) })
			for len(ops) > 0 && actx.Err() == nil {
				n := min(len(ops), 100)
				if _, err := v.store.Commit(actx, facts.Txn{Ops: ops[:n]}); err != nil && actx.Err() == nil {
					t.Errorf("agents' reports: %v", err)
					return
				}
				ops = ops[n:]
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	scaleWorld(t, v, nodes, services, per)
	v.run(t, e)
	t.Cleanup(func() { stopAgents(); agents.Wait() })

	settled := func(want int) func() bool {
		return func() bool {
			ok := true
			v.mirror.View(func(r facts.Reader) {
				got := placedBy(r)
				for i := 1; i <= services; i++ {
					ok = ok && got[fmt.Sprintf("svc-%05d", i)] == want
				}
				ok = ok && len(reports(r)) == 0
			})
			return ok
		}
	}
	waitFor(t, "every instance placed and running", 60*time.Second, settled(per))
	waitFor(t, "the engine done with them", 60*time.Second, func() bool { return len(actionsLeft(v, rs, true)) == 0 })

	// From here on, every fifth transaction meets a writer that got
	// there first, and the term ends at the first and the fourth
	// transaction of stops.
	var chunks, txns, ended atomic.Int64 // transactions of stops, all transactions, terms ended
	e.beforeCommit = func(chunk []*staged) {
		stops := 0
		for _, st := range chunk {
			if st.f.Rule == "stop_placed_extras" {
				stops++
			}
		}
		if stops > 0 {
			if n := chunks.Add(1); (n == 1 || n == 4) && ended.Load() < 2 {
				ended.Add(1)
				keys, _, err := v.store.WithRoot("/ccattler-leader/").List(v.ctx, "", 0)
				if err != nil || len(keys) == 0 {
					t.Errorf("election keys: %v %v", keys, err)
					return
				}
				if _, err := v.store.RevokeAt(v.ctx, facts.LeaseID(keys[0].Lease)); err != nil {
					t.Error(err)
				}
				return
			}
		}
		// Every fifth transaction of any rule: counted by the transactions
		// of stops alone, a count left at 2 (mod 5) once the stops were
		// done made every later transaction conflict, for ever.
		if txns.Add(1)%5 != 2 || len(chunk) < 2 {
			return
		}
		for _, rd := range chunk[len(chunk)-1].f.Reads {
			if !guarded(rd) || rd.Rev == 0 || rd.Prefix || !strings.HasPrefix(rd.Key, "observed/instance/") {
				continue
			}
			f, ok, err := v.store.Get(v.ctx, rd.Key)
			if err == nil && ok {
				_, err = v.store.Commit(v.ctx, facts.Txn{Ops: []facts.Op{facts.Put(rd.Key, f.Value)}})
			}
			if err != nil {
				t.Error(err)
			}
			return
		}
	}
	for i := 1; i <= services; i++ {
		s := fmt.Sprintf("svc-%05d", i)
		v.commitAll(t, []facts.Op{facts.Put(facts.ServiceInstances(s), []byte("3")), facts.Put(facts.Intent("user", s), []byte("3"))})
	}
	deadline := time.Now().Add(90 * time.Second)
	for !settled(3)() {
		if time.Now().After(deadline) {
			v.mirror.View(func(r facts.Reader) { t.Logf("placed %v, reports to make %d", placedBy(r), len(reports(r))) })
			left := actionsLeft(v, rs, false)
			t.Fatalf("every service scaled to 3: not within 90s; engine %+v; %d actions left, e.g. %v", e.Stats(), len(left), left[:min(len(left), 5)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ended.Load() < 2 {
		t.Errorf("the term ended %d times during the stops, want 2", ended.Load())
	}
	st := e.Stats()
	if st.Terms < 3 || st.Conflicts == 0 {
		t.Errorf("terms %d, conflicts %d: want 3 terms and some conflicts", st.Terms, st.Conflicts)
	}

	// Quiet: nothing written for a while, the engine caught up.
	last := int64(-1)
	waitFor(t, "the engine settled", 60*time.Second, func() bool {
		var rev int64
		v.mirror.View(func(r facts.Reader) { rev = r.Rev() })
		quiet := rev == last && e.Stats().SettledRev >= rev
		last = rev
		if !quiet {
			time.Sleep(300 * time.Millisecond)
		}
		return quiet
	})
	if left := actionsLeft(v, rs, true); len(left) > 0 {
		t.Errorf("%d firings left to make after the scale-down, e.g. %v", len(left), left[:min(len(left), 5)])
	}
	t.Logf("terms %d, conflicts %d, reevaluated %d, full rounds %d, gave up %d", st.Terms, st.Conflicts, st.Reevaluated, st.FullRounds, st.GaveUp)
}
