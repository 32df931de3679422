package eval

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// sampleStartOfMap is how sampleStart hashed the outer binding before: a map
// of it (the last value of a name bound twice), its names sorted, FNV-1a of
// each name and value followed by a NUL.
func sampleStartOfMap(b *binding, n int) int {
	outer := b.strings()
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(outer)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(outer[k]))
		h.Write([]byte{0})
	}
	return int(h.Sum64() % uint64(n))
}

// TestSampleStartHashesTheBinding: a bounded choice starts its sample where
// it did when the binding was hashed through a map of it (the same binding
// sees the same sample, placements stay where they were), for names bound
// twice too, and finding where allocates nothing.
func TestSampleStartHashesTheBinding(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	names := []string{"id", "svc", "state", "cpu", "mem", "zone", "a", "ab", "b", ""}
	for range 2000 {
		b := &binding{}
		for range r.IntN(30) {
			b.push(names[r.IntN(len(names))], strVal(fmt.Sprintf("v%d", r.IntN(5))))
		}
		n := 1 + r.IntN(5000)
		if got, want := sampleStart(b, n), sampleStartOfMap(b, n); got != want {
			t.Fatalf("binding %v %v of %d candidates: starts at %d, want %d", b.names, b.vals, n, got, want)
		}
	}
	b := &binding{}
	for i := range 25 {
		b.push(fmt.Sprintf("var%02d", 24-i), strVal("value"))
	}
	if a := testing.AllocsPerRun(100, func() { sampleStart(b, 1000) }); a != 0 {
		t.Errorf("sampleStart allocates %v times a call, want none", a)
	}
}
