package main

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// scaleTable holds the facts of nodes nodes and services services of
// perService running instances each, as agents and the engine write them.
func scaleTable(t testing.TB, nodes, services, perService int) *facts.Table {
	schema := facts.NewSchema()
	tb := facts.NewTable(schema)
	rev := int64(0)
	put := func(k, v string) {
		rev++
		tb.Put(facts.Fact{Key: k, Value: []byte(v), ModRevision: rev, CreateRevision: rev})
	}
	scaleFacts(nodes, services, perService, put)
	return tb
}

// scaleFacts writes, through put, the facts of nodes nodes and services
// services of perService running instances each, as agents and the engine
// write them.
func scaleFacts(nodes, services, perService int, put func(k, v string)) {
	for i := range nodes {
		n := fmt.Sprintf("n-%04d", i+1)
		put(facts.Node(n), `{}`)
		put(facts.NodeAttr(n, "state"), `"alive"`)
		put(facts.NodeAttr(n, "zone"), fmt.Sprintf(`"z%d"`, i%3))
		put(facts.NodeAttr(n, "architecture"), `"amd64"`)
		put(facts.NodeAttr(n, "capacity/cpu"), `8`)
		put(facts.NodeAttr(n, "capacity/memory"), `"16Gi"`)
		put(facts.NodeAttr(n, "available/cpu"), `3`)
		put(facts.NodeAttr(n, "available/memory"), `"11Gi"`)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	for sv := range services {
		name := fmt.Sprintf("svc-%03d", sv)
		put("desired/service/"+name, `{}`)
		put("desired/service/"+name+"/image", `"nginx:1.28"`)
		put("desired/service/"+name+"/instances", fmt.Sprint(perService))
		put("effective/service/"+name+"/instances", fmt.Sprint(perService))
		for i := range perService {
			id := fmt.Sprintf("%08x", 0x10000000+sv*perService+i)
			node := fmt.Sprintf("n-%04d", (sv*perService+i)%nodes+1)
			ip := fmt.Sprintf("10.%d.%d.%d", sv, i/250, i%250+1)
			put(facts.Instance(id), `{}`)
			put(facts.InstanceAttr(id, "service"), fmt.Sprintf("%q", name))
			put(facts.InstanceAttr(id, "node"), fmt.Sprintf("%q", node))
			put(facts.InstanceAttr(id, "state"), `"running"`)
			put(facts.InstanceAttr(id, "health"), `"healthy"`)
			put(facts.InstanceAttr(id, "image"), `"nginx:1.28"`)
			put(facts.InstanceAttr(id, "ip"), fmt.Sprintf("%q", ip))
			put(facts.InstanceAttr(id, "started_at"), fmt.Sprintf("%q", now))
			put(facts.Placement(id), fmt.Sprintf("%q", node))
			put(facts.Endpoint(name, id), fmt.Sprintf(`{"ip":%q,"port":8080}`, ip))
		}
	}
}

func BenchmarkConsoleCluster(b *testing.B) {
	tb := scaleTable(b, 1000, 100, 100)
	schema := facts.NewSchema()
	for b.Loop() {
		clusterOf(tb, schema)
	}
}

// The console has no authentication of its own: the admin endpoint serves
// it only when it listens on a loopback address, never on a wildcard or a
// routable one.
func TestConsoleServedOnLoopbackOnly(t *testing.T) {
	ui := adminHandler{Pattern: "/ui/", LoopbackOnly: true}
	metrics := adminHandler{Pattern: "/x"}
	for addr, want := range map[string]bool{
		"127.0.0.1": true, "127.0.0.53": true, "::1": true,
		"0.0.0.0": false, "::": false, "10.1.2.3": false, "192.168.0.10": false, "::ffff:10.0.0.1": false,
	} {
		a := &net.TCPAddr{IP: net.ParseIP(addr), Port: 2381}
		if got := ui.servedOn(a); got != want {
			t.Errorf("console on %s: served %v, want %v", a, got, want)
		}
		if !metrics.servedOn(a) {
			t.Errorf("a handler that is not loopback-only is not served on %s", a)
		}
	}
	if ui.servedOn(&net.UnixAddr{Name: "/tmp/x", Net: "unix"}) {
		t.Error("console served on a unix socket")
	}
}

// The tables built from a mirror's view equal `get`'s from the store: the
// same rows, whichever way the facts are read.
func TestConsoleTablesAreGetTables(t *testing.T) {
	tb := scaleTable(t, 20, 3, 7)
	cl := clusterOf(tb, facts.NewSchema())
	w := newWorld()
	tb.Prefix("", func(f facts.Fact) bool { w.add(facts.NewSchema(), f); return true })
	w.index()
	if got, want := fmt.Sprint(cl.Nodes), fmt.Sprint(consoleTable(w.nodes())); got != want {
		t.Errorf("nodes:\n%s\nwant\n%s", got, want)
	}
	svc := consoleTable(w.services())
	if len(cl.Services.Rows) != 3 || cl.Services.Columns[len(cl.Services.Columns)-1] != "autoscale" {
		t.Fatalf("services: %v", cl.Services)
	}
	for i, r := range cl.Services.Rows {
		if fmt.Sprint(r[:len(r)-1]) != fmt.Sprint(svc.Rows[i]) {
			t.Errorf("service row %v, want %v", r, svc.Rows[i])
		}
	}
	if r := cl.Services.Rows[0]; r[cl.Services.Col("running")] != "7" || r[cl.Services.Col("healthy")] != "7" {
		t.Errorf("svc-000 row: %v", r)
	}
	insts, eps := cl.More()
	if len(insts.Rows) != 21 || len(eps.Rows) != 21 {
		t.Errorf("%d instances, %d endpoints, want 21 each", len(insts.Rows), len(eps.Rows))
	}
}
