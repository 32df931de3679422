package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// recorder commits writes together with their record, as the engine does.
type recorder struct {
	t   *testing.T
	s   *facts.Store
	ids *facts.EventIDs
}

func (r *recorder) rev(key string) int64 {
	f, ok, err := r.s.Get(context.Background(), key)
	if err != nil {
		r.t.Fatal(err)
	}
	if !ok {
		return 0
	}
	return f.ModRevision
}

// fire commits kv (key, value pairs; value "" deletes) with a record of rule
// that read the given keys at their current revisions.
func (r *recorder) fire(rule, kind, leader string, reads []string, kv ...string) int64 {
	r.t.Helper()
	rec := facts.EventRecord{Rule: rule, Kind: kind, Version: "v1", Leader: leader, Bindings: map[string]string{"rule": rule}}
	var ops []facts.Op
	for _, k := range reads {
		rec.Reads = append(rec.Reads, facts.EventRead{Key: k, Rev: r.rev(k)})
	}
	for i := 0; i < len(kv); i += 2 {
		ops = append(ops, facts.Put(kv[i], []byte(kv[i+1])))
		rec.Writes = append(rec.Writes, facts.EventWrite{Key: kv[i], Value: facts.RawJSON(kv[i+1])})
	}
	id, at := r.ids.Next()
	rec.Time = at.Format(time.RFC3339Nano)
	b, _ := json.Marshal(rec)
	ops = append(ops, facts.Put(facts.Event(id), b))
	rev, err := r.s.Commit(context.Background(), facts.Txn{Ops: ops})
	if err != nil {
		r.t.Fatal(err)
	}
	return rev
}

func (r *recorder) report(kv ...string) {
	r.t.Helper()
	var ops []facts.Op
	for i := 0; i < len(kv); i += 2 {
		ops = append(ops, facts.Put(kv[i], []byte(kv[i+1])))
	}
	if _, err := r.s.Commit(context.Background(), facts.Txn{Ops: ops}); err != nil {
		r.t.Fatal(err)
	}
}

// seedLifecycle writes the seed's service lifecycle for one instance, with
// records as the default policies write them.
func seedLifecycle(t *testing.T, s *facts.Store) *recorder {
	r := &recorder{t: t, s: s, ids: facts.NewEventIDs()}
	r.fire("apply", "apply", "user", nil,
		"desired/service/web", `{}`, "desired/service/web/image", `"nginx:1.28"`,
		"desired/service/web/instances", `3`, "desired/service/web/expose/8080", `{}`,
		"intent/user/service/web/instances", `3`)
	r.fire("resolve_intent", "derive", "server-1", []string{"intent/user/service/web/instances"},
		"effective/service/web/instances", `3`)
	r.fire("create_instances", "emit", "server-1", []string{"effective/service/web/instances", "observed/instance/a8f31/service"},
		"observed/instance/a8f31/service", `"web"`, "observed/instance/a8f31/state", `"pending"`)
	r.report("observed/node/node-1/state", `"alive"`)
	r.fire("schedule", "emit", "server-1",
		[]string{"observed/instance/a8f31/service", "observed/instance/a8f31/state", "placement/instance/a8f31", "observed/node/node-1/state"},
		"placement/instance/a8f31", `"node-1"`)
	r.report("observed/instance/a8f31/node", `"node-1"`, "observed/instance/a8f31/state", `"running"`,
		"observed/instance/a8f31/ip", `"10.1.0.5"`, "observed/instance/a8f31/health", `"healthy"`)
	r.fire("publish_endpoint", "derive", "server-1",
		[]string{"observed/instance/a8f31/service", "observed/instance/a8f31/state", "observed/instance/a8f31/health",
			"observed/instance/a8f31/ip", "desired/service/web/expose/8080"},
		"endpoint/service/web/a8f31", `{"ip": "10.1.0.5", "port": 8080}`)
	return r
}

func TestWhyWalksTheWholeChain(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	seedLifecycle(t, s)
	ctx := context.Background()

	tree, err := audit.Why(ctx, s, "endpoint/service/web/a8f31", audit.WhyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	audit.PrintTree(&buf, tree)
	text := buf.String()
	t.Log("\n" + text)

	// The chain of the issue, in order along one path of the tree.
	path := []struct{ key, explain string }{
		{"endpoint/service/web/a8f31", "rule publish_endpoint"},
		{"observed/instance/a8f31/state", "reported by the agent of node-1"},
		{"placement/instance/a8f31", "rule schedule"},
		{"observed/instance/a8f31/state", "rule create_instances"},
		{"effective/service/web/instances", "rule resolve_intent"},
		{"intent/user/service/web/instances", "applied by user"},
	}
	n := tree
	for i, step := range path {
		if i > 0 {
			var next *audit.Node
			for _, c := range n.Because {
				if c.Key == step.key && strings.Contains(c.Explain, step.explain) {
					next = c
				}
			}
			if next == nil {
				t.Fatalf("step %d: %s (%s) is not among the reasons of %s", i, step.key, step.explain, n.Key)
			}
			n = next
		} else if n.Key != step.key || !strings.Contains(n.Explain, step.explain) {
			t.Fatalf("root = %s (%s)", n.Key, n.Explain)
		}
	}
	if n.Origin != audit.OriginApply || n.Event == nil || n.Event.Rule != "apply" {
		t.Errorf("chain ends at %+v, want the user's apply record", n)
	}
	for _, want := range []string{"├─", "└─", `"node-1"`, "rules v1"} {
		if !strings.Contains(text, want) {
			t.Errorf("tree text lacks %q", want)
		}
	}

	// As a graph: every edge joins known nodes, the root included.
	g := audit.ToGraph(tree)
	ids := map[string]bool{}
	for _, gn := range g.Nodes {
		ids[gn.ID] = true
	}
	if !ids[g.Root] {
		t.Errorf("graph root %s is not a node", g.Root)
	}
	for _, ed := range g.Edges {
		if !ids[ed.From] || !ids[ed.To] {
			t.Errorf("dangling edge %+v", ed)
		}
	}
	if len(g.Edges) < len(path)-1 {
		t.Errorf("graph has %d edges", len(g.Edges))
	}
}

func TestWhySaysWhenRecordsExpired(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	seedLifecycle(t, s)
	ctx := context.Background()
	// Retention removes every record older than the endpoint's.
	evs, _, _, err := audit.List(ctx, s, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ops []facts.Op
	for _, ev := range evs[:len(evs)-1] {
		ops = append(ops, facts.Delete(facts.Event(ev.ID)))
	}
	if _, err := s.Commit(ctx, facts.Txn{Ops: ops}); err != nil {
		t.Fatal(err)
	}
	tree, err := audit.Why(ctx, s, "placement/instance/a8f31", audit.WhyOptions{})
	if err != nil {
		t.Fatalf("why failed instead of saying the record expired: %v", err)
	}
	if tree.Origin != audit.OriginExpired || !strings.Contains(tree.Explain, "retention") {
		t.Errorf("placement explained as %s: %s", tree.Origin, tree.Explain)
	}
	if _, err := audit.Why(ctx, s, "placement/instance/fffff", audit.WhyOptions{}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("why of a missing key: %v", err)
	}
}

func TestEventsFilterAndFollow(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	r := seedLifecycle(t, s)
	ctx := context.Background()

	tests := []struct {
		name string
		flt  audit.Filter
		want []string
	}{
		{"all", audit.Filter{}, []string{"apply", "resolve_intent", "create_instances", "schedule", "publish_endpoint"}},
		{"rule", audit.Filter{Rule: "schedule"}, []string{"schedule"}},
		{"key prefix", audit.Filter{KeyPrefix: "placement/"}, []string{"schedule"}},
		{"since future", audit.Filter{Since: time.Now().Add(time.Hour)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, _, bad, err := audit.List(ctx, s, tt.flt)
			if err != nil || bad != 0 {
				t.Fatalf("List: %v (bad %d)", err, bad)
			}
			var got []string
			for _, ev := range evs {
				got = append(got, ev.Rule)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("rules = %v, want %v", got, tt.want)
			}
		})
	}

	_, rev, _, _ := audit.List(ctx, s, audit.Filter{})
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got := make(chan audit.Event, 4)
	go audit.Follow(fctx, s, audit.Filter{Rule: "publish_endpoint"}, rev, func(ev audit.Event) { got <- ev })
	time.Sleep(100 * time.Millisecond)
	r.fire("schedule", "emit", "server-1", nil, "placement/instance/b72c9", `"node-2"`)
	wrote := r.fire("publish_endpoint", "derive", "server-1", nil, "endpoint/service/web/b72c9", `{"ip": "10.1.0.9", "port": 8080}`)
	select {
	case ev := <-got:
		if ev.Rule != "publish_endpoint" || ev.Rev != wrote {
			t.Errorf("followed %s@%d, want publish_endpoint@%d", ev.Rule, ev.Rev, wrote)
		}
	case <-fctx.Done():
		t.Fatal("no event followed")
	}
}

func TestWhyNotFindsTheNewestRejection(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	ctx := context.Background()
	ids := facts.NewEventIDs()
	reject := func(id string, rej ...facts.EventRejection) {
		eid, at := ids.Next()
		b, _ := json.Marshal(facts.EventRecord{Rule: "schedule", Kind: audit.KindRejection, Version: "v1",
			Bindings: map[string]string{"id": id}, Time: at.Format(time.RFC3339Nano), Rejected: rej})
		if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Event(eid), b)}}); err != nil {
			t.Fatal(err)
		}
	}
	cand := func(node string, filters ...string) facts.EventRejection {
		return facts.EventRejection{Candidate: map[string]string{"node": node}, Filters: filters}
	}
	reject("a8f31", cand("node-1", "alive"))
	reject("b72c9", cand("node-1", "memory"))
	reject("a8f31", cand("node-2", "cpu"), cand("node-1", "cpu", "memory"))

	ev, ok, err := audit.WhyNot(ctx, s, "id", "a8f31")
	if err != nil || !ok {
		t.Fatalf("WhyNot = %v, %v", ok, err)
	}
	var buf bytes.Buffer
	audit.PrintRejection(&buf, ev)
	want := "node-1                   rejected by cpu, memory\n  node-2                   rejected by cpu\n"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("printed\n%s\nwant the newest record, sorted by node:\n%s", buf.String(), want)
	}
	if _, ok, _ := audit.WhyNot(ctx, s, "id", "c913d"); ok {
		t.Error("found a rejection for an instance that has none")
	}
	// A value JSON escapes (< as \u003c) is found too, though its bytes
	// are not in the record.
	reject("x<y", cand("node-3", "alive"))
	if ev, ok, err := audit.WhyNot(ctx, s, "id", "x<y"); err != nil || !ok || ev.Bindings["id"] != "x<y" {
		t.Errorf("WhyNot(x<y) = %v, %v, %v", ev.Bindings, ok, err)
	}
}

func TestWhyExplainsTheClockAsTheServers(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	r := &recorder{t: t, s: s, ids: facts.NewEventIDs()}
	r.report("observed/clock", `"2026-11-29T12:00:12Z"`, "observed/node/node-2/state", `"alive"`)
	r.fire("node_unreachable", "emit", "server-1", []string{"observed/node/node-2/state", "observed/clock"},
		"observed/node/node-2/state", `"unreachable"`)
	tree, err := audit.Why(context.Background(), s, "observed/node/node-2/state", audit.WhyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tree.Because {
		if c.Key == "observed/clock" {
			if c.Origin != audit.OriginClock {
				t.Errorf("the clock explained as %s: %s", c.Origin, c.Explain)
			}
			return
		}
	}
	t.Errorf("the firing's clock read is not among its reasons: %+v", tree.Because)
}

// After a compaction, why still explains a firing by its records (current
// keys) and fills in the values that are still current, and marks each
// value gone with the history with the compact revision.
func TestWhyAfterCompaction(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	r := seedLifecycle(t, s)
	ctx := context.Background()
	compactAt := r.rev("endpoint/service/web/a8f31")
	if err := s.Compact(ctx, compactAt); err != nil {
		t.Fatal(err)
	}
	tree, err := audit.Why(ctx, s, "endpoint/service/web/a8f31", audit.WhyOptions{})
	if err != nil {
		t.Fatalf("why after a compaction: %v", err)
	}
	var running, pending *audit.Node
	var walk func(n *audit.Node)
	walk = func(n *audit.Node) {
		if n.Key == "observed/instance/a8f31/state" {
			if n.Origin == audit.OriginRule {
				pending = n
			} else {
				running = n
			}
		}
		for _, c := range n.Because {
			walk(c)
		}
	}
	walk(tree)
	if string(tree.Value) == "" || tree.Compacted != 0 || tree.Event == nil || tree.Event.Rule != "publish_endpoint" {
		t.Errorf("root after compaction: %+v", tree)
	}
	// Read by publish_endpoint, still the current version: its value is kept.
	if running == nil || string(running.Value) != `"running"` || running.Compacted != 0 {
		t.Errorf("the state the endpoint read (still current): %+v", running)
	}
	// Read by schedule, overwritten since: the value is gone, the record stays.
	if pending == nil || pending.Value != nil || pending.Compacted != compactAt || pending.Event == nil || pending.Event.Rule != "create_instances" {
		t.Fatalf("the state schedule read (overwritten, compacted): %+v", pending)
	}
	if rev, n := audit.Compacted(tree); rev != compactAt || n < 1 {
		t.Errorf("Compacted(tree) = %d, %d; want %d and at least one version", rev, n, compactAt)
	}
	var buf bytes.Buffer
	audit.PrintTree(&buf, tree)
	if !strings.Contains(buf.String(), "observed/instance/a8f31/state = (value compacted)  @") {
		t.Errorf("tree text does not mark the compacted value:\n%s", buf.String())
	}
	found := false
	for _, gn := range audit.ToGraph(tree).Nodes {
		found = found || (gn.ID == fmt.Sprintf("%s@%d", pending.Key, pending.Rev) && gn.Compacted == compactAt)
	}
	if !found {
		t.Errorf("graph lacks the compacted node %s@%d with compacted_before %d", pending.Key, pending.Rev, compactAt)
	}
	// Nothing compacted: nothing marked.
	e2 := etcdtest.Start(t)
	s2 := e2.Store(t)
	seedLifecycle(t, s2)
	tree2, err := audit.Why(ctx, s2, "endpoint/service/web/a8f31", audit.WhyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rev, n := audit.Compacted(tree2); n != 0 {
		t.Errorf("Compacted of an uncompacted explanation = %d, %d", rev, n)
	}
}
