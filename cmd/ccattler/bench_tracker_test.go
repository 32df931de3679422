package main

import (
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// TestSpread: the instances beyond each service's even share of the
// nodes, and the instances per node with their variation, empty nodes
// counted.
func TestSpread(t *testing.T) {
	tr := &tracker{inst: map[string]*benchInst{}, nodes: map[string]*benchNode{}}
	for _, n := range []string{"a", "b", "c"} {
		tr.node(n).state = "alive"
	}
	place := func(id, svc, node string) { in := tr.instance(id); in.service, in.node = svc, node }
	// web: three on a (its share is one a node): two beyond it.
	place("w1", "web", "a")
	place("w2", "web", "a")
	place("w3", "web", "a")
	// db: four on three nodes, share two: two on b and two on a is even.
	place("d1", "db", "b")
	place("d2", "db", "b")
	place("d3", "db", "a")
	place("d4", "db", "a")
	tr.instance("p1").service = "web" // pending: no node, not counted
	s := tr.spread()
	if s.Excess != 2 || s.Min != 0 || s.Max != 5 {
		t.Fatalf("spread %+v, want 2 beyond, 0-5 a node", s)
	}
	// 5, 2, 0: mean 7/3.
	mean := 7.0 / 3
	want := math.Sqrt(((5-mean)*(5-mean)+(2-mean)*(2-mean)+mean*mean)/3) / mean
	if math.Abs(s.CV-want) > 1e-9 {
		t.Errorf("cv %v, want %v", s.CV, want)
	}
	if s := (&tracker{inst: map[string]*benchInst{}, nodes: map[string]*benchNode{}}).spread(); s != (spread{}) {
		t.Errorf("no nodes: %+v, want zero", s)
	}
}

// TestTrackerStages: each instance's stages are stamped with when the
// watch delivered the change that ended them, the first time; instances
// created before the apply, or without an endpoint yet, are left out.
func TestTrackerStages(t *testing.T) {
	tr := &tracker{inst: map[string]*benchInst{}, endpoints: map[string]string{}, nodes: map[string]*benchNode{}, states: map[string]int{}}
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	put := func(at time.Duration, key, val string) {
		tr.apply(facts.Change{Fact: facts.Fact{Key: key, Value: []byte(val)}}, start.Add(at), start.Add(at+time.Hour))
	}
	ms := time.Millisecond
	way := func(id string, created, placed, healthy, endpoint time.Duration) {
		put(created, "observed/instance/"+id+"/service", `"web"`)
		put(created, "observed/instance/"+id+"/state", `"pending"`)
		if placed > 0 {
			put(placed, "placement/instance/"+id, `"node-1"`)
		}
		if healthy > 0 {
			put(healthy, "observed/instance/"+id+"/state", `"running"`)
			put(healthy, "observed/instance/"+id+"/health", `"healthy"`)
		}
		if endpoint > 0 {
			put(endpoint, "endpoint/service/web/"+id, `"10.0.0.1:80"`)
		}
	}
	// Ten instances: created 100ms after the apply, placed 0-90ms after,
	// running healthy a second later and their endpoints two after that.
	for k := range 10 {
		c := 100 * ms
		p := c + time.Duration(k)*10*ms
		way(fmt.Sprintf("a%04d", k), c, p, p+time.Second, p+3*time.Second)
	}
	// Later changes do not move a stage's end: unhealthy and healthy
	// again, placed elsewhere.
	put(10*time.Second, "observed/instance/a0000/health", `"unhealthy"`)
	put(11*time.Second, "observed/instance/a0000/health", `"healthy"`)
	put(12*time.Second, "placement/instance/a0001", `"node-2"`)
	way("b0000", -time.Second, 50*ms, 60*ms, 70*ms) // created before the apply
	way("b0001", 100*ms, 200*ms, 300*ms, 0)         // no endpoint yet
	got := tr.stages(start)
	want := []stageLatency{
		{"apply → created", 0.1, 0.1, 0.1},
		{"created → placed", 0.04, 0.08, 0.09}, // 0, 10, ..., 90ms: the 5th, 9th and 10th
		{"placed → running healthy", 1, 1, 1},
		{"running healthy → endpoint", 2, 2, 2},
	}
	if len(got) != len(want) {
		t.Fatalf("stages %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Stage != w.Stage || math.Abs(g.P50-w.P50) > 1e-9 || math.Abs(g.P90-w.P90) > 1e-9 || math.Abs(g.Max-w.Max) > 1e-9 {
			t.Errorf("stage %d: %+v, want %+v", i, g, w)
		}
	}
	if s := (&tracker{inst: map[string]*benchInst{}}).stages(start); s != nil {
		t.Errorf("no instance: %+v, want none", s)
	}
}

// The bench's etcd gets two ports, client and peer: they must differ
// (asked for one after another, each closed before the next, they once
// came back the same and the bench failed to start). Each call's ports
// are held until all are found, so no call returns one twice.
func TestFreeLoopbackURLsDiffer(t *testing.T) {
	// What keeps them apart: a reserved port cannot be listened on, so
	// the kernel cannot hand it out again, until it is let go.
	ln, port, err := reservePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := net.Listen("tcp", "127.0.0.1:"+port); err == nil {
		again.Close()
		t.Errorf("port %s is free while reserved", port)
	}
	ln.Close()
	if again, err := net.Listen("tcp", "127.0.0.1:"+port); err != nil {
		t.Errorf("port %s still taken once let go: %v", port, err)
	} else {
		again.Close()
	}
	for range 300 {
		urls, err := freeLoopbackURLs(3)
		if err != nil {
			t.Fatal(err)
		}
		if len(urls) != 3 || urls[0] == urls[1] || urls[1] == urls[2] || urls[0] == urls[2] {
			t.Fatalf("freeLoopbackURLs(3) = %v, want three different URLs", urls)
		}
		for _, u := range urls {
			if !strings.HasPrefix(u, "http://127.0.0.1:") {
				t.Fatalf("%s: want a loopback URL", u)
			}
		}
	}
}
