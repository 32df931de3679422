package console

import (
	"math"
	"testing"
)

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:2381": true, "127.0.0.1": true, "[::1]:2381": true, "::1": true, "localhost:2381": true, "LocalHost": true,
		"attacker.example": false, "attacker.example:2381": false, "127.0.0.1.attacker.example": false,
		"localhost.attacker.example:80": false, "0.0.0.0:2381": false, "10.0.0.1": false, "": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestAlloc(t *testing.T) {
	for cell, want := range map[string]float64{"8/3": 0.625, "16Gi/11Gi": 0.3125, "8/8": 0, "8/0": 1, "8/9": 0, "1Gi/512Mi": 0.5, "17179869184/8589934592": 0.5} {
		a := alloc(cell)
		if !a.OK || math.Abs(a.Used-want) > 1e-9 {
			t.Errorf("alloc(%q) = %+v, want %v used", cell, a, want)
		}
	}
	for _, cell := range []string{"", "/", "8", "0/0", "x/y", `invalid("abc")/3`, "-/-"} {
		if a := alloc(cell); a.OK {
			t.Errorf("alloc(%q) = %+v, want not a bar", cell, a)
		}
	}
}

// Cycles (a firing that read its own write) and self loops are laid out
// without looping forever; every node gets a place.
func TestLayoutWithCycles(t *testing.T) {
	nodes := []lnode{{ID: "a", W: 40, H: 20}, {ID: "b", W: 40, H: 20}, {ID: "c", W: 40, H: 20}, {ID: "d", W: 40, H: 20}}
	edges := []ledge{{"a", "b"}, {"b", "c"}, {"c", "a"}, {"c", "c"}, {"a", "d"}, {"d", "c"}, {"a", "missing"}}
	p := layout(nodes, edges)
	for _, n := range nodes {
		if _, ok := p.Pos[n.ID]; !ok {
			t.Errorf("%s not placed", n.ID)
		}
	}
	if p.Layer["a"] != 0 || p.Layer["c"] <= p.Layer["b"] || p.Layer["c"] <= p.Layer["d"] {
		t.Errorf("layers %v", p.Layer)
	}
	if len(p.Routes[3]) != 0 || len(p.Routes[6]) != 0 {
		t.Errorf("a self loop or an edge to no node got a route: %v %v", p.Routes[3], p.Routes[6])
	}
	if len(p.Routes[0]) < 2 || len(p.Routes[2]) < 2 {
		t.Errorf("routes %v", p.Routes)
	}
	empty := layout(nil, nil)
	if len(empty.Pos) != 0 {
		t.Errorf("empty layout: %+v", empty)
	}
}
