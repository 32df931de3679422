package main

import (
	"fmt"
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
	return tb
}

func BenchmarkConsoleCluster(b *testing.B) {
	tb := scaleTable(b, 1000, 100, 100)
	schema := facts.NewSchema()
	for b.Loop() {
		clusterOf(tb, schema)
	}
}
