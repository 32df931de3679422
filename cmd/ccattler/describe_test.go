package main

import (
	"bytes"
	"context"
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
		if got := touches(e, key); got != want {
			t.Errorf("touches(%s) = %v, want %v", key, got, want)
		}
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
		{"node", "node-1", `State:\s+alive \(lease not held\)`},
		{"node", "node-1", `Memory:\s+7Gi of 8Gi free`},
	} {
		if out := text(c.kind, c.name); !regexp.MustCompile(c.want).MatchString(out) {
			t.Errorf("describe %s %s lacks %s:\n%s", c.kind, c.name, c.want, out)
		}
	}
	// b72c9 is placed (pending on node-2): no "why not placed" for it.
	if out := text("service", "web"); strings.Contains(out, "Why not placed") {
		t.Errorf("describe service web explains a placed instance:\n%s", out)
	}
	if _, err := describe(ctx, s, "node", "node-9", 10, started); err == nil || !strings.Contains(err.Error(), `node "node-9" not found`) {
		t.Errorf("describe node node-9: %v", err)
	}
}
