package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"sigs.k8s.io/yaml"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the tests that have them")

// TestGetJSONShape pins the JSON shape of `get -o json` for every kind
// (docs/cli.md documents it; scripts rely on it): the fixture's objects,
// with labels, resources, an autoscaler and a value that breaks the schema
// added, printed as JSON and compared with testdata/get_json.golden. Run
// with -update after changing a shape on purpose, and say so in docs/cli.md.
func TestGetJSONShape(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	started := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	put := getFixture(started)
	for k, v := range map[string]any{
		facts.ServiceLabel("web", "tier"): "front", facts.ServiceLabel("web", "team"): "edge",
		facts.ServiceCPU("web"): "500m", facts.ServiceMemory("web"): "512Mi",
		facts.ServiceAutoscaleMetric("web"): "cpu", facts.ServiceAutoscaleThreshold("web"): 0.6,
		facts.ServiceAutoscaleMin("web"): 2, facts.ServiceAutoscaleMax("web"): 6,
		facts.AutoscaleRecommendation("web"): 3,
		facts.InstanceCPU("a8f31"):           0.5, facts.InstanceMemory("a8f31"): "512Mi",
		facts.NodeAddress("node-1"):    "192.0.2.10",
		facts.InstanceService("d0002"): "api", facts.InstanceState("d0002"): "failed", facts.InstanceNode("d0002"): "node-1",
		facts.InstanceReason("d0002"): "start: port 8080 is not free on this node", facts.InstanceExitStatus("d0002"): 1,
	} {
		put[k] = v
	}
	for k, v := range put {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	// As a rogue writer would, unchecked: the typed output shows null and
	// names the key, never the bad value as data.
	for k, v := range map[string]string{facts.NodeCapacityMemory("node-2"): `"plenty"`, facts.VolumeSize("data"): `"big"`} {
		if _, err := etcdtest.PutRaw(ctx, s, k, v); err != nil {
			t.Fatal(err)
		}
	}
	w, err := loadWorld(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	now := started.Add(90 * time.Second)
	var got bytes.Buffer
	for _, kind := range []string{"services", "instances", "nodes", "endpoints", "volumes"} {
		got.WriteString("# get " + kind + " -o json\n")
		var typed []any
		for _, it := range w.items(kind, now) {
			typed = append(typed, it.typed)
		}
		if err := printJSON(&got, typed); err != nil {
			t.Fatal(err)
		}
		// -o yaml is the same document.
		var y bytes.Buffer
		if err := printYAML(&y, typed); err != nil {
			t.Fatal(err)
		}
		fromYAML, err := yaml.YAMLToJSON(y.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := json.Marshal(typed)
		if !jsonEqual(t, fromYAML, plain) {
			t.Errorf("get %s -o yaml is not the JSON document:\n%s", kind, y.String())
		}
	}
	golden := filepath.Join("testdata", "get_json.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGetJSONShape -update to write it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("get -o json changed shape: got\n%s\nwant (%s)\n%s", got.String(), golden, want)
	}

	// The types themselves, whatever the golden file says.
	svcs := w.servicesJSON()
	web := svcs[len(svcs)-1]
	if web.Name != "web" || *web.Desired != 3 || *web.Effective != 2 || *web.CPU != 0.5 || *web.Memory != 512<<20 ||
		len(web.Ports) != 2 || web.Ports[0] != 8080 || web.Labels["tier"] != "front" || *web.Autoscale.Recommendation != 3 {
		t.Errorf("service web: %+v", web)
	}
	ns := w.nodesJSON()
	if *ns[0].Memory.Capacity != 8<<30 || *ns[0].CPU.Available != 3.5 || ns[1].Memory.Capacity != nil ||
		strings.Join(ns[1].Invalid, ",") != facts.NodeCapacityMemory("node-2") {
		t.Errorf("nodes: %+v", ns)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
