package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// A record touches an object when it read or wrote one of its keys or a key
// under it, and not a key of an object whose name only starts alike.
func TestDescribeTouches(t *testing.T) {
	e := audit.Event{EventRecord: facts.EventRecord{
		Writes: []facts.EventWrite{{Key: "desired/service/webapp/image"}},
		Reads:  []facts.EventRead{{Key: "placement/instance/a8f31"}},
	}}
	for key, want := range map[string]bool{
		"desired/service/webapp":    true,
		"desired/service/web":       false,
		"placement/instance/a8f31":  true,
		"placement/instance/a8f3":   false,
		"observed/instance/a8f31":   false,
		"desired/service/webapp/im": false,
	} {
		if got := newKeyTrees([]string{key}).touchedBy(e); got != want {
			t.Errorf("touched by a record under %s: %v, want %v", key, got, want)
		}
	}
	// Among many trees, only the one that holds a key counts.
	many := newKeyTrees([]string{"desired/service/web", "observed/instance/b72c9", "placement/instance/a8f3"})
	if many.touchedBy(e) {
		t.Errorf("trees %v touched by a record of desired/service/webapp and placement/instance/a8f31", many)
	}
	many["placement/instance/a8f31"] = true
	if !many.touchedBy(e) {
		t.Errorf("trees %v not touched by a record that read placement/instance/a8f31", many)
	}
}

// describe's screen for the fixture's services, instance and nodes: the
// rollout, the failures, the intents, a pending instance without a
// rejection yet, a node without its lease.
func TestDescribeFixture(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	started := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	put := getFixture(started)
	put[facts.Intent("user", "web")] = 3
	put[facts.InstanceState("a8f31b")] = "stopped" // an id that only starts alike
	put[facts.Intent("autoscaler", "web")] = 2
	put[facts.ServiceAutoscaleMetric("web")] = "cpu"
	put[facts.ServiceAutoscaleThreshold("web")] = 0.6
	put[facts.ServiceAutoscaleMin("web")] = 1
	put[facts.ServiceAutoscaleMax("web")] = 4
	for k, v := range put {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	text := func(kind, name string) string {
		d, err := describe(ctx, s, kind, name, 10, started.Add(90*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := d.print(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, c := range []struct{ kind, name, want string }{
		{"service", "api", `Rollout:\s+halted: api:2 on 0 of 2: 1 instance\(s\) of api:2 failed`},
		{"service", "api", `Status:\s+1 running, 1 healthy, 0/2 updated; failing: 3 failures in a row, last: start: port 8080 is not free`},
		{"service", "web", `Instances:\s+desired 3, effective 2 \(intents: autoscaler 2, user 3\)`},
		{"service", "web", `Autoscale:\s+cpu at 0.6 per instance, 1 to 4 instances, recommends -`},
		{"service", "web", `(?m)^  a8f31\s+web\s+node-1\s+running\s+healthy\s+1m30s\s+-$`},
		{"service", "web", `(?m)^  a8f31  10.1.0.5:8080$`},
		{"instance", "a8f31", `Started:\s+2026-11-29T18:00:00Z \(1m30s ago\)`},
		{"instance", "a8f31", `(?m)^Endpoints:\n  a8f31  10.1.0.5:8080$`},
		{"instance", "a8f31", `(?m)^  observed/instance/a8f31/state\s+"running"$`},
		{"node", "node-1", `State:\s+alive \(lease not held\)`},
		{"node", "node-1", `Memory:\s+7Gi of 8Gi free`},
	} {
		if out := text(c.kind, c.name); !regexp.MustCompile(c.want).MatchString(out) {
			t.Errorf("describe %s %s lacks %s:\n%s", c.kind, c.name, c.want, out)
		}
	}
	if out := text("instance", "a8f31"); strings.Contains(out, "a8f31b") {
		t.Errorf("describe instance a8f31 shows a8f31b's facts:\n%s", out)
	}
	// b72c9 is placed (pending on node-2): no "why not placed" for it.
	if out := text("service", "web"); strings.Contains(out, "Why not placed") {
		t.Errorf("describe service web explains a placed instance:\n%s", out)
	}
	if _, err := describe(ctx, s, "node", "node-9", 10, started); err == nil || !strings.Contains(err.Error(), `node "node-9" not found`) {
		t.Errorf("describe node node-9: %v", err)
	}
}

// A large service's description fits a screen: at most describeRows
// instances (a failed one among them though it sorts last), endpoints and
// pending ones, describeRejections rejections printed whole, and many facts
// under one key as one counted line; -o json keeps every one. The records
// are matched against every instance's keys, and a pending instance gets
// its newest rejection.
func TestDescribeLargeService(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	started := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	put := map[string]any{
		facts.DesiredService("big"): map[string]any{}, facts.ServiceImage("big"): "nginx:1.28",
		facts.ServiceInstances("big"): 70, facts.EffectiveInstances("big"): 70,
	}
	const running, pending = 44, 25
	id := func(i int) string { return fmt.Sprintf("a%04x", i) }
	for i := range running {
		put[facts.InstanceService(id(i))] = "big"
		put[facts.InstanceState(id(i))] = "running"
		put[facts.InstanceHealth(id(i))] = "healthy"
		put[facts.Placement(id(i))] = "node-1"
		put[facts.Endpoint("big", id(i))] = map[string]any{"ip": "10.1.0.5", "port": 8000 + i}
		put[facts.ServiceMetric("big", "cpu", id(i))] = 0.5
	}
	for i := running; i < running+pending; i++ {
		put[facts.InstanceService(id(i))] = "big"
		put[facts.InstanceState(id(i))] = "pending"
	}
	put[facts.InstanceService("fffff")] = "big"
	put[facts.InstanceState("fffff")] = "failed"
	put[facts.InstanceReason("fffff")] = "exited with status 3"
	for k, v := range put {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	// A rejection for every pending instance, and an older one, of another
	// filter, for the first.
	record := func(n int, rec facts.EventRecord) {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Event(fmt.Sprintf("20261129T180000.%09dZ-%06d", n, n)), b)}}); err != nil {
			t.Fatal(err)
		}
	}
	reject := func(n int, inst, filter string) {
		record(n, facts.EventRecord{Rule: "schedule", Kind: audit.KindRejection, Bindings: map[string]string{"id": inst},
			Reads:    []facts.EventRead{{Key: facts.InstanceState(inst)}},
			Rejected: []facts.EventRejection{{Candidate: map[string]string{"node": "node-1"}, Filters: []string{filter}}}})
	}
	reject(1, id(running), "alive")
	for i := running; i < running+pending; i++ {
		reject(10+i, id(i), "cpu")
	}
	// A record of an instance of the service, and one of a service whose
	// name only starts alike. The first wrote another service's key too:
	// counted, not listed.
	record(100, facts.EventRecord{Rule: "note_failed", Writes: []facts.EventWrite{{Key: facts.InstanceAttr("fffff", "failed_at"), Value: facts.RawJSON(`"2026-11-29T18:00:00Z"`)},
		{Key: facts.ServiceImage("other"), Value: facts.RawJSON(`"x"`)}}})
	record(101, facts.EventRecord{Rule: "apply", Writes: []facts.EventWrite{{Key: facts.ServiceImage("bigger"), Value: facts.RawJSON(`"x"`)}}})

	d, err := describe(ctx, s, "service", "big", 5, started)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Instances) != running+pending+1 || len(d.Endpoints) != running || len(d.Pending) != pending {
		t.Errorf("described %d instances, %d endpoints, %d pending; want every one: %d, %d, %d",
			len(d.Instances), len(d.Endpoints), len(d.Pending), running+pending+1, running, pending)
	}
	if d.Matched != pending+2 || d.Events[len(d.Events)-1].Rule != "note_failed" {
		t.Errorf("matched %d records, the last shown %+v; want %d, the last note_failed", d.Matched, d.Events[len(d.Events)-1], pending+2)
	}
	if r := d.Pending[0].Rejection; r == nil || r.Rejected[0].Filters[0] != "cpu" {
		t.Errorf("pending %s: rejection %+v, want the newest (cpu)", d.Pending[0].Instance, r)
	}
	var b bytes.Buffer
	if err := d.print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`(?m)^  fffff\s+big\s+-\s+failed\s+-\s+-\s+exited with status 3$`,
		`(?m)^  … 50 more \(6 pending, 44 running\): ccattler get instances --service big lists every one$`,
		`(?m)^  … 24 more: ccattler get endpoints big lists every one$`,
		`(?m)^  observed/service/big/metrics/cpu/\*\s+44 facts: ccattler facts get observed/service/big/metrics/cpu/ lists them$`,
		`(?m)^  desired/service/big/image\s+"nginx:1.28"$`,
		`(?m)^  a0030: rejected by rule schedule \(event 20261129T180000.000000058Z-000058\): ccattler why-not instance a0030$`,
		`(?m)^  … 5 more instances without a placement: ccattler why-not instance ID says why one is not$`,
		`(?m)^    \+ observed/instance/fffff/failed_at = "2026-11-29T18:00:00Z"\n    … and 1 more write outside this service's keys \(ccattler events shows the record whole\)$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("describe service big lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "rule schedule found no candidate"); n != describeRejections {
		t.Errorf("printed %d rejections whole, want %d:\n%s", n, describeRejections, out)
	}
	if n := strings.Count(out, "/metrics/cpu/a"); n != 0 {
		t.Errorf("listed %d metrics facts one by one:\n%s", n, out)
	}
	if lines := strings.Count(out, "\n"); lines > 100 {
		t.Errorf("describe service big took %d lines", lines)
	}

	// One instance: few enough names that records not naming it are
	// passed over undecoded; the same two records, the newest rejection.
	one, err := describe(ctx, s, "instance", id(running), 5, started)
	if err != nil {
		t.Fatal(err)
	}
	if one.Matched != 2 || len(one.Pending) != 1 || one.Pending[0].Rejection == nil || one.Pending[0].Rejection.Rejected[0].Filters[0] != "cpu" {
		t.Errorf("describe instance %s: matched %d, pending %+v; want 2 records and the cpu rejection", id(running), one.Matched, one.Pending)
	}
}

// A service's or node's description reads only its object's facts of the
// instance trees (loadDescribed), and says exactly what one built from
// every tree says: the row, the counts, the instances, the endpoints, the
// facts, the records; for names that only start alike, for an instance
// placed on one node and reported on another, and for values written past
// the schema.
func TestDescribeReadsItsObjectsFacts(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	now := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	put := getFixture(now)
	// webapp and node-10: names that start as web's and node-1's do.
	put[facts.DesiredService("webapp")] = map[string]any{}
	put[facts.ServiceImage("webapp")] = "app:1"
	put[facts.Node("node-10")] = map[string]any{}
	put[facts.NodeState("node-10")] = "alive"
	put[facts.InstanceService("d0001")] = "webapp"
	put[facts.InstanceState("d0001")] = "running"
	put[facts.InstanceNode("d0001")] = "node-10"
	put[facts.InstanceHealth("d0001")] = "healthy"
	put[facts.Placement("d0001")] = "node-10"
	put[facts.Endpoint("webapp", "d0001")] = map[string]any{"ip": "10.1.0.9", "port": 80}
	// Placed on node-2, still reported running on node-1 (moving): counted
	// on node-2, listed on node-1.
	put[facts.InstanceService("e0001")] = "web"
	put[facts.InstanceState("e0001")] = "running"
	put[facts.InstanceNode("e0001")] = "node-1"
	put[facts.Placement("e0001")] = "node-2"
	put[facts.InstanceStartedAt("e0001")] = now
	for k, v := range put {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]string{ // as a rogue writer would, unchecked
		facts.InstanceService("f0001"): `["web"]`,
		facts.InstanceState("f0001"):   `"running"`,
		facts.Placement("f0001"):       `{"node":"node-1"}`,
		facts.InstanceNode("f0002"):    `"node-1"`,
		facts.InstanceState("f0002"):   `"exploded"`,
		facts.InstanceHealth("a8f31"):  `42`,
		facts.Endpoint("web", "b72c9"): `{"ip":"not an ip"}`,
	} {
		if _, err := etcdtest.PutRaw(ctx, s, k, v); err != nil {
			t.Fatal(err)
		}
	}
	// Records of an instance of web, of webapp's, and of node-1.
	for n, rec := range []facts.EventRecord{
		{Rule: "schedule", Writes: []facts.EventWrite{{Key: facts.Placement("e0001"), Value: facts.RawJSON(`"node-2"`)}}},
		{Rule: "schedule", Writes: []facts.EventWrite{{Key: facts.Placement("d0001"), Value: facts.RawJSON(`"node-10"`)}}},
		{Rule: "agent", Writes: []facts.EventWrite{{Key: facts.NodeState("node-1"), Value: facts.RawJSON(`"alive"`)}}},
	} {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Event(fmt.Sprintf("20261129T180000.%09dZ-%06d", n, n)), b)}}); err != nil {
			t.Fatal(err)
		}
	}
	full, err := loadWorld(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ kind, name string }{
		{"service", "web"}, {"service", "webapp"}, {"service", "api"},
		{"node", "node-1"}, {"node", "node-2"}, {"node", "node-10"},
	} {
		w, err := loadDescribed(ctx, s, c.kind, c.name)
		if err != nil {
			t.Fatal(err)
		}
		for id, svc := range w.attrs["observed.instance.service"] {
			node, placed := w.get("observed.instance.node", id), w.get("placement.instance", id)
			if c.kind == "service" && svc != c.name || c.kind == "node" && node != c.name && placed != c.name {
				t.Errorf("describe %s %s parsed instance %s (service %s, node %s, placed on %s)", c.kind, c.name, id, svc, node, placed)
			}
		}
		text := func(w *world) string {
			d, err := describeIn(ctx, s, w, c.kind, c.name, 10, now.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			j, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := d.print(&b); err != nil {
				t.Fatal(err)
			}
			return string(j) + "\n" + b.String()
		}
		got, want := text(w), text(full)
		if got != want {
			t.Errorf("describe %s %s read narrowly:\n%s\nfrom every tree:\n%s", c.kind, c.name, got, want)
		}
		if !strings.Contains(want, `"instances":[{`) && c.name != "api" || !strings.Contains(want, `"events":[{`) && c.name == "web" {
			t.Errorf("describe %s %s: the fixture shows too little:\n%s", c.kind, c.name, want)
		}
	}
	// Only what one node holds: node-2 counts e0001 (placed there) and
	// b72c9, node-1 lists e0001 (reported there) but does not count it.
	for node, want := range map[string]int{"node-1": 2, "node-2": 2, "node-10": 1} {
		d, err := describe(ctx, s, "node", node, 0, now)
		if err != nil {
			t.Fatal(err)
		}
		if d.Node.Instances != want {
			t.Errorf("describe node %s: %d instances counted, want %d", node, d.Node.Instances, want)
		}
	}
}
