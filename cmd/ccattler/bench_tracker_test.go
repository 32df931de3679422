package main

import (
	"math"
	"net"
	"strings"
	"testing"
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
