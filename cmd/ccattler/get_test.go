package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestGetTables builds every table from facts the way the controllers and
// agents write them, against a real etcd.
func TestGetTables(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	started := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	put := getFixture(started)
	for k, v := range put {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	w, err := loadWorld(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	now := started.Add(90 * time.Second)
	cases := []struct {
		name string
		rows any
		want string
	}{
		{"services", w.services(), `
NAME  IMAGE       DESIRED  EFFECTIVE  RUNNING  HEALTHY  PORTS      UPDATED  ROLLOUT  STATUS   FAILURES  REASON
api   api:2       -        2          1        1        -          0/2      halted   failing  3         start: port 8080 is not free on this node
web   nginx:1.28  3        2          1        1        8080,8443  1/2      -        failing  1         exited with status 1`},
		{"instances", w.instances(now), `
ID     SERVICE  NODE    STATE    HEALTH   IP        IMAGE       AGE
c0001  api      node-1  running  healthy  -         api:1       -
a8f31  web      node-1  running  healthy  10.1.0.5  nginx:1.28  1m30s
b72c9  web      node-2  pending  -        -         -           -`},
		{"nodes", w.nodes(), `
ID      STATE     ZONE   ARCH   CPU    MEMORY   INSTANCES
node-1  alive     eu-1a  amd64  4/3.5  8Gi/7Gi  2
node-2  draining  -      -      -      -        1`},
		{"endpoints", w.endpoints(), `
SERVICE  INSTANCE  ADDRESS
web      a8f31     10.1.0.5:8080`},
		{"volumes", w.volumes(), `
NAME  SIZE  PERSISTENT  ACCESS_MODE  ATTACHED_NODE  STATE
data  10Gi  true        single-node  node-1         attached`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printTable(&b, tc.rows); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(trimLines(b.String()), "\n")
			want := strings.Join(trimLines(tc.want), "\n")
			if got != want {
				t.Errorf("table:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// getFixture is a small cluster as the controllers and agents write it:
// two services (one mid-rollout and failing), two nodes, three instances,
// an endpoint and a volume.
func getFixture(started time.Time) map[string]any {
	return map[string]any{
		facts.DesiredService("web"): map[string]any{}, facts.ServiceImage("web"): "nginx:1.28",
		facts.ServiceInstances("web"): 3, facts.ServiceExpose("web", 8443): map[string]any{},
		facts.ServiceExpose("web", 8080): map[string]any{}, facts.EffectiveInstances("web"): 2,
		facts.Node("node-1"): map[string]any{}, facts.NodeState("node-1"): "alive", facts.NodeZone("node-1"): "eu-1a",
		facts.NodeArchitecture("node-1"): "amd64", facts.NodeCapacityCPU("node-1"): 4, facts.NodeAvailableCPU("node-1"): 3.5,
		facts.NodeCapacityMemory("node-1"): "8Gi", facts.NodeAvailableMemory("node-1"): "7Gi",
		facts.Node("node-2"): map[string]any{}, facts.NodeState("node-2"): "draining",
		facts.Instance("a8f31"): map[string]any{}, facts.InstanceService("a8f31"): "web", facts.InstanceNode("a8f31"): "node-1",
		facts.InstanceState("a8f31"): "running", facts.InstanceHealth("a8f31"): "healthy", facts.InstanceIP("a8f31"): "10.1.0.5",
		facts.InstanceImage("a8f31"): "nginx:1.28", facts.InstanceStartedAt("a8f31"): started,
		facts.InstanceService("b72c9"): "web", facts.InstanceState("b72c9"): "pending", facts.Placement("b72c9"): "node-2",
		facts.Endpoint("web", "a8f31"): map[string]any{"ip": "10.1.0.5", "port": 8080},
		facts.DesiredService("api"):    map[string]any{}, facts.ServiceImage("api"): "api:2", facts.EffectiveInstances("api"): 2,
		facts.InstanceService("c0001"): "api", facts.InstanceState("c0001"): "running", facts.InstanceHealth("c0001"): "healthy",
		facts.InstanceImage("c0001"): "api:1", facts.Placement("c0001"): "node-1",
		facts.ServiceRollout("api"): map[string]any{"image": "api:2", "updated": 0, "total": 2, "state": "halted",
			"reason": "1 instance(s) of api:2 failed or are unhealthy; 1 running an older image keep serving"},
		facts.RestartState("api", "failures"): 3, facts.RestartState("api", "reason"): "start: port 8080 is not free on this node",
		facts.RestartState("web", "failures"): 1, facts.RestartState("web", "reason"): "exited with status 1", // 1 of 2 running: failing
		facts.DesiredVolume("data"): map[string]any{}, facts.VolumeSize("data"): "10Gi", facts.VolumePersistent("data"): true,
		facts.VolumeAccessMode("data"): "single-node", facts.VolumeAttachedNode("data"): "node-1", facts.VolumeState("data"): "attached",
	}
}

func trimLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimRight(l, " "))
	}
	return out
}

// A value written past apply that breaks the schema is shown as invalid,
// never as data: `get nodes` printed "lots/4" for a capacity of "lots".
func TestGetShowsInvalidValues(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	for k, v := range map[string]string{
		facts.NodeState("node-1"): `"alive"`, facts.NodeCapacityCPU("node-1"): `"lots"`,
		facts.NodeAvailableCPU("node-1"): `4`, facts.ServiceImage("web"): `12345`,
		facts.DesiredService("web"): `{}`,
	} {
		if _, err := etcdtest.PutRaw(ctx, s, k, v); err != nil { // as a rogue writer would, unchecked
			t.Fatal(err)
		}
	}
	w, err := loadWorld(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	nodes := w.nodes()
	if len(nodes) != 1 || nodes[0].CPU != `invalid("lots")/4` {
		t.Errorf("get nodes: cpu %+v, want invalid(\"lots\")/4", nodes)
	}
	svcs := w.services()
	if len(svcs) != 1 || svcs[0].Image != `invalid("12345")` {
		t.Errorf("get services: %+v, want image invalid(\"12345\")", svcs)
	}
}

// A service whose instances wait for a node that fits says so, counted
// from the instance facts or read from the engine's summary alike, and a
// failing service stays failing.
func TestGetServicesSaysUnplaced(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	for k, v := range map[string]any{
		facts.DesiredService("big"): map[string]any{}, facts.ServiceImage("big"): "nginx:1.28",
		facts.ServiceInstances("big"): 4, facts.EffectiveInstances("big"): 4,
		facts.InstanceService("a0001"): "big", facts.InstanceState("a0001"): "running", facts.Placement("a0001"): "node-1",
		facts.InstanceService("a0002"): "big", facts.InstanceState("a0002"): "pending", facts.Placement("a0002"): "node-1",
		facts.InstanceService("a0003"): "big", facts.InstanceState("a0003"): "pending",
		facts.InstanceService("a0004"): "big", facts.InstanceState("a0004"): "pending",
	} {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	want := "big   nginx:1.28  4        4          1        0        -      0/4      -        unplaced  -         2 not placed yet: ccattler describe service big says why"
	check := func(how string, w *world) {
		t.Helper()
		var b bytes.Buffer
		if err := printTable(&b, w.services()); err != nil {
			t.Fatal(err)
		}
		if got := trimLines(b.String()); len(got) != 2 || got[1] != want {
			t.Errorf("%s: get services:\n%s\nwant the row\n%s", how, b.String(), want)
		}
		if js := w.servicesJSON(); len(js) != 1 || js[0].Status != "unplaced" || js[0].Unplaced != 2 {
			t.Errorf("%s: get services -o json: %+v", how, js)
		}
	}
	full, err := loadWorld(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	check("counted", full)
	if _, err := s.PutValue(ctx, facts.ServiceSummary("big"), map[string]any{"running": 1, "healthy": 0, "updated": 0, "target": 4, "unplaced": 2}); err != nil {
		t.Fatal(err)
	}
	w, err := loadServices(ctx, s)
	if err != nil || w == nil {
		t.Fatalf("loadServices = %v, %v", w != nil, err)
	}
	check("from the summary", w)

	if _, err := s.PutValue(ctx, facts.RestartState("big", "failures"), 2); err != nil {
		t.Fatal(err)
	}
	if w, _ := loadServices(ctx, s); w == nil || w.services()[0].Status != "failing" {
		t.Errorf("a failing service with unplaced instances: %+v, want failing", w.services())
	}
}

// get nodes counts the instances on a node now: placed there, or reported
// there pending or running; not the stopped and failed ones its history
// keeps for an hour.
func TestGetNodesCountsInstancesNow(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	for k, v := range map[string]any{
		facts.Node("node-1"): map[string]any{}, facts.NodeState("node-1"): "alive",
		facts.InstanceState("a0001"): "running", facts.InstanceNode("a0001"): "node-1", facts.Placement("a0001"): "node-1",
		facts.InstanceState("a0002"): "pending", facts.Placement("a0002"): "node-1",
		facts.InstanceState("a0003"): "running", facts.InstanceNode("a0003"): "node-1", // placement gone, still stopping
		facts.InstanceState("a0004"): "stopped", facts.InstanceNode("a0004"): "node-1",
		facts.InstanceState("a0005"): "failed", facts.InstanceNode("a0005"): "node-1",
		facts.InstanceIP("a0001"): "10.1.0.5", facts.InstanceHealth("a0001"): "healthy",
		facts.NodeCapacityCPU("node-1"): 4, facts.NodeAvailableCPU("node-1"): 2,
	} {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	// Everything read, and what the nodes table reads (loadNodes): the
	// same rows; the latter parsed no instance fact but nodes and states.
	all, err := loadWorld(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	w, err := (&getView{kind: "nodes"}).load(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*world{"every fact": all, "the nodes table's": w} {
		if ns := w.nodes(); len(ns) != 1 || ns[0].Instances != 3 || ns[0].State != "alive" || ns[0].CPU != "4/2" {
			t.Errorf("get nodes from %s: %+v, want node-1, alive, cpu 4/2, with 3 instances (a0001, a0002, a0003)", name, ns)
		}
	}
	for typ := range w.attrs {
		if strings.HasPrefix(typ, "observed.instance.") && typ != "observed.instance.node" && typ != "observed.instance.state" {
			t.Errorf("the nodes table parsed the instance facts of type %s", typ)
		}
	}
	if all.attrs["observed.instance.ip"]["a0001"] == "" {
		t.Errorf("the instance's address was not written: the check above checks nothing")
	}
}
