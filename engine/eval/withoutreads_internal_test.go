package eval

import (
	"reflect"
	"testing"
)

// withoutReads takes one listing of each key out, in order, as a
// recomputation without the member would list them; a member none of whose
// facts is listed (most of a large group's) costs no copy.
func TestWithoutReads(t *testing.T) {
	r := func(keys ...string) []Read {
		out := make([]Read, len(keys))
		for i, k := range keys {
			out[i] = Read{Key: k, Rev: int64(i + 1)}
		}
		return out
	}
	listed := r("a", "b", "c", "b", "d")
	for _, c := range []struct {
		name string
		keys []string
		want []string
	}{
		{"none listed", []string{"x", "y"}, []string{"a", "b", "c", "b", "d"}},
		{"first", []string{"a"}, []string{"b", "c", "b", "d"}},
		{"last and unlisted", []string{"x", "d"}, []string{"a", "b", "c", "b"}},
		{"one listing of a key listed twice", []string{"b"}, []string{"a", "c", "b", "d"}},
		{"a key given twice", []string{"b", "b"}, []string{"a", "c", "d"}},
		{"all", []string{"d", "b", "c", "a", "b"}, nil},
	} {
		got := withoutReads(listed, c.keys...)
		var keys []string
		for _, g := range got {
			keys = append(keys, g.Key)
		}
		if !reflect.DeepEqual(keys, c.want) {
			t.Errorf("%s: withoutReads(%v) = %v, want %v", c.name, c.keys, keys, c.want)
		}
	}
	if got := withoutReads(listed, "x"); &got[0] != &listed[0] {
		t.Error("nothing taken out, yet the reads were copied")
	}
	if got := withoutReads(listed, "a"); &got[0] == &listed[1] || listed[0].Key != "a" {
		t.Error("taking a read out changed the list it was given")
	}
	many := make([]string, 40) // more keys than the scratch flags hold
	for i := range many {
		many[i] = "k"
	}
	if got := withoutReads(r("k", "k", "z"), many...); len(got) != 1 || got[0].Key != "z" {
		t.Errorf("40 keys: got %v, want [z]", got)
	}
}
