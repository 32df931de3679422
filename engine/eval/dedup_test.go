package eval

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDedupReadsLinear: the comparison dedupReads makes of a firing's few
// reads keeps what its map keeps, in the same order: the first read of a
// key, replaced by a later guarded one when it is unguarded; a prefix
// read apart from a key read of the same string (and, as the map keys
// them, the same as a key read spelled with the prefix marker after it).
func TestDedupReadsLinear(t *testing.T) {
	keys := []string{"a", "a/b", "observed/node/n1/state", "", "a\x00prefix", "a/b\x00prefix", "\x00prefix"}
	rng := rand.New(rand.NewPCG(19, 16))
	for n := 0; n < 2000; n++ {
		in := make([]Read, rng.IntN(dedupLinear+1))
		for i := range in {
			in[i] = Read{Key: keys[rng.IntN(len(keys))], Rev: int64(i), Prefix: rng.IntN(3) == 0, NoGuard: rng.IntN(2) == 0}
		}
		want := dedupReadsMap(slices.Clone(in))
		got := dedupReads(slices.Clone(in))
		if !slices.Equal(got, want) {
			t.Fatalf("dedupReads(%+v)\n = %+v\nthe map keeps %+v", in, got, want)
		}
	}
	// The collision the map's keys make, kept by the comparison.
	in := []Read{{Key: "a", Prefix: true, NoGuard: true}, {Key: "a\x00prefix", Rev: 7}}
	if got := dedupReads(slices.Clone(in)); len(got) != 1 || got[0].Rev != 7 {
		t.Errorf("dedupReads(%+v) = %+v, want the guarded read alone", in, got)
	}
	if got := dedupReads([]Read{{Key: "a", Prefix: true}, {Key: "a"}}); len(got) != 2 {
		t.Errorf("a prefix read and a key read of the same string: %+v, want both", got)
	}
}
