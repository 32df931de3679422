package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// guardRules bring a node back and stop a service's extras on the count
// of its placed instances on nodes that are not unreachable. %s is the
// aggregate's guard attribute.
const guardRules = `
rule "node_back" {
  doc       = "An unreachable node that is leased again is alive."
  principal = "failure"
  match {
    state = "observed/node/{node}/state"
    held  = "observed/node/{node}/leased"
  }
  when = "state == 'unreachable'"
  emit "observed/node/{node}/state" {
    value = "'alive'"
  }
}

rule "stop_extras" {
  doc       = "Stop every extra of a service, the newest first."
  principal = "reconcile"
  match {
    want = "effective/service/{svc}/instances"
  }
  aggregate "placed" {
    match {
      svc    = "observed/instance/{i}/service"
      node   = "placement/instance/{i}"
      nstate = "observed/node/{node}/state"
    }
    where = "nstate != 'unreachable'"
    count = true
    %s
  }
  when = "placed > want"
  choose "victim" {
    match {
      svc      = "observed/instance/{v}/service"
      vnode    = "placement/instance/{v}"
      vnst     = "observed/node/{vnode}/state"
      vstarted = "observed/instance/{v}/started_at"
    }
    filters {
      live = "vnst != 'unreachable'"
    }
    order = [desc("vstarted")]
    pick  = "placed - want"
  }
  delete "placement/instance/{v}" {}
}
`

// A frozen node's lease comes back: in one round node_back marks it alive
// and stop_extras, counting its three instances, stops the three
// replacements. If node_back's write then fails (the lease mark went away
// between evaluation and commit), the stops counted instances that are
// still on an unreachable node: committed, they would leave the service
// with none live. Guarded, they are dropped with it, whether the members
// are compared (within the limit) or the stops wait for the whole plan
// (past it); the control shows the unguarded count does let them through.
func TestGuardedStopDoesNotCommitOnAFailedCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		guard     string
		opts      []eval.Option
		wantStops int
		afterAll  bool
	}{
		{name: "unguarded control", opts: []eval.Option{eval.WithMaxAggregateReads(0)}, wantStops: 3},
		{name: "guarded, members compared", guard: "guard = true", opts: []eval.Option{eval.WithMaxAggregateReads(0)}},
		{name: "guarded, over the limit", guard: "guard = true", opts: []eval.Option{eval.WithMaxAggregateReads(0), eval.WithMaxGuardedReads(4)}, afterAll: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t)
			rs, diags := rules.LoadFiles(map[string][]byte{"r.hcl": []byte(fmt.Sprintf(guardRules, tc.guard))}, rules.WithSchema(v.store.Schema))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			v.put(t, facts.EffectiveInstances("web"), "3")
			v.put(t, facts.NodeState("node-1"), `"unreachable"`)
			v.put(t, "observed/node/node-1/leased", "true")
			v.put(t, facts.NodeState("node-2"), `"alive"`)
			var rev int64
			for i := 1; i <= 3; i++ {
				for _, in := range []struct{ id, node, started string }{
					{fmt.Sprintf("a000%d", i), "node-1", fmt.Sprintf("2026-11-29T09:0%d:00Z", i)}, // the originals
					{fmt.Sprintf("b000%d", i), "node-2", fmt.Sprintf("2026-11-29T11:0%d:00Z", i)}, // their replacements
				} {
					v.put(t, facts.InstanceService(in.id), `"web"`)
					v.put(t, "observed/instance/"+in.id+"/started_at", `"`+in.started+`"`)
					rev = v.put(t, facts.Placement(in.id), `"`+in.node+`"`)
				}
			}
			if err := v.mirror.WaitRev(v.ctx, rev); err != nil {
				t.Fatal(err)
			}
			ev := ruleSetEvaluator{eval.New(rs, tc.opts...)}
			var p eval.Plan
			v.mirror.View(func(r facts.Reader) { p = ev.Full(r) })
			stops := 0
			for _, f := range p.Firings {
				if f.Rule == "stop_extras" {
					stops++
					if f.AfterAll != tc.afterAll {
						t.Fatalf("stop AfterAll = %v, want %v", f.AfterAll, tc.afterAll)
					}
				}
			}
			if len(p.Firings) != 4 || stops != 3 || p.Firings[0].Rule != "node_back" {
				t.Fatalf("the plan: node_back, then 3 stops; got %+v", p.Firings)
			}
			// Between evaluation and commit the lease mark goes: node_back's
			// read of it is stale, and node-1 stays unreachable.
			if _, err := v.store.Commit(v.ctx, facts.Txn{Ops: []facts.Op{facts.Delete("observed/node/node-1/leased")}}); err != nil {
				t.Fatal(err)
			}
			e := v.engine(t, ev, testConfig())
			if err := e.apply(v.ctx, nil, ev, p); err != nil {
				t.Fatalf("apply: %v", err)
			}
			var committed []string
			for _, r := range v.events(t) {
				committed = append(committed, r.Rule)
			}
			got := strings.Count(strings.Join(committed, " "), "stop_extras")
			if got != tc.wantStops {
				t.Fatalf("%d stops committed (records %v), want %d", got, committed, tc.wantStops)
			}
			left := 0
			for i := 1; i <= 3; i++ {
				for _, id := range []string{fmt.Sprintf("a000%d", i), fmt.Sprintf("b000%d", i)} {
					if _, ok := v.get(t, facts.Placement(id)); ok {
						left++
					}
				}
			}
			if left != 6-tc.wantStops {
				t.Fatalf("%d placements left, want %d", left, 6-tc.wantStops)
			}
			if f, _ := v.get(t, facts.NodeState("node-1")); string(f.Value) != `"unreachable"` {
				t.Fatalf("node-1 is %s: node_back committed on a stale read", f.Value)
			}
		})
	}
}
