package ruletest

import (
	"fmt"
	"sort"

	"github.com/ccattler/ccattler/engine/eval"
)

// ReadsSorted returns copies of the firings with each one's reads in a
// fixed order: evaluators that reach an aggregate's result differently
// (computed, kept from an earlier round, adjusted) list its members in
// different orders, and plans are compared without it.
func ReadsSorted(fs []eval.Firing) []eval.Firing {
	out := make([]eval.Firing, len(fs))
	for i, f := range fs {
		f.Reads = append([]eval.Read(nil), f.Reads...)
		sort.Slice(f.Reads, func(a, b int) bool { return fmt.Sprint(f.Reads[a]) < fmt.Sprint(f.Reads[b]) })
		out[i] = f
	}
	return out
}
