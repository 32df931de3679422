package eval

import (
	"fmt"
	"math"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// A kept outcome is served only for values CEL cannot tell apart: what a
// fact may hold that compares equal yet evaluates differently (-0 and 0,
// 1 and 1.0, "1" and 1), and kinds the check does not know (lists, maps,
// timestamps), are never the same, so the candidate is evaluated.
func TestSameValServesOnlyWhatCELCannotTellApart(t *testing.T) {
	nan := types.Double(math.NaN())
	list := types.DefaultTypeAdapter.NativeToValue([]any{1})
	for _, tc := range []struct {
		name string
		a, b ref.Val
		same bool
	}{
		{"equal ints", types.Int(3), types.Int(3), true},
		{"different ints", types.Int(3), types.Int(4), false},
		{"int and uint", types.Int(1), types.Uint(1), false},
		{"int and double", types.Int(1), types.Double(1), false},
		{"int and its string", types.Int(1), types.String("1"), false},
		{"equal strings", types.String("alive"), types.String("alive"), true},
		{"bools", types.True, types.False, false},
		{"nulls", types.NullValue, types.NullValue, true},
		{"zero and negative zero", types.Double(0), types.Double(math.Copysign(0, -1)), false},
		{"a NaN and itself", nan, nan, true},
		{"empty optionals", types.OptionalNone, types.OptionalNone, true},
		{"empty and present", types.OptionalNone, types.OptionalOf(types.Int(0)), false},
		{"present optionals", types.OptionalOf(types.Int(2)), types.OptionalOf(types.Int(2)), true},
		{"optionals of different kinds", types.OptionalOf(types.Int(2)), types.OptionalOf(types.Double(2)), false},
		{"a list and itself", list, list, false},
		{"a timestamp and itself", types.Timestamp{}, types.Timestamp{}, false},
	} {
		if got := sameVal(tc.a, tc.b); got != tc.same {
			t.Errorf("%s: sameVal(%v, %v) = %v, want %v", tc.name, tc.a, tc.b, got, tc.same)
		}
	}
	// A string a join bound has no CEL form until CEL reads it.
	for _, tc := range []struct {
		name string
		a, b val
		same bool
	}{
		{"bound and read", strVal("web"), celVal(types.String("web")), true},
		{"bound strings", strVal("web"), strVal("api"), false},
		{"a string and a number of the same text", strVal("1"), celVal(types.Int(1)), false},
		{"numbers", celVal(types.Int(1)), celVal(types.Int(1)), true},
	} {
		if got := sameBound(tc.a, tc.b); got != tc.same {
			t.Errorf("%s: sameBound = %v, want %v", tc.name, got, tc.same)
		}
	}
}

// Outcomes share an outer sig only when no binding's values could tell
// their outer reads apart (a choice compares each sig once and serves
// every outcome that holds it), and share it whenever they read the same
// values: a string bound by a join (no CEL form) and the same string as
// CEL are spelt apart, which costs a comparison, never a wrong outcome.
func TestOuterSigsShareOnlyWhatNoBindingTellsApart(t *testing.T) {
	list := types.DefaultTypeAdapter.NativeToValue([]any{1})
	pool := []val{
		strVal("web"), strVal("api"), strVal(""), strVal("1"),
		{cel: types.String("web"), str: "web"}, {cel: types.String("web")},
		{cel: types.Int(1), str: "1"}, {cel: types.Int(2), str: "2"}, {cel: types.Uint(1), str: "1"},
		{cel: types.Double(1)}, {cel: types.Double(0)}, {cel: types.Double(math.Copysign(0, -1))}, {cel: types.Double(math.NaN())},
		{cel: types.True}, {cel: types.False}, {cel: types.NullValue},
		{cel: types.OptionalNone}, {cel: types.OptionalOf(types.Int(1))}, {cel: types.OptionalOf(types.Double(1))},
		{cel: list}, {cel: types.Timestamp{}},
	}
	reads := func(v val) []memoRead {
		return []memoRead{{agg: -1, name: "cpu", v: strVal("2")}, {agg: 0, v: celVal(types.Int(7))}, {agg: -1, name: "zone", v: v}}
	}
	rd := &round{}
	for i, a := range pool {
		if rd.internOuter(reads(a)) != rd.internOuter(reads(a)) && sameBound(a, a) {
			t.Errorf("%d: the same value read twice got two sigs", i)
		}
		for j, b := range pool {
			if rd.internOuter(reads(a)) != rd.internOuter(reads(b)) {
				continue
			}
			for k, x := range pool {
				if sameBound(x, a) != sameBound(x, b) {
					t.Errorf("values %d and %d share a sig, but sameBound tells them apart against %d", i, j, k)
				}
			}
		}
	}
	sig := rd.internOuter(reads(strVal("eu")))
	if len(sig.reads) != 2 || sig.reads[0].name != "cpu" || sig.reads[1].name != "zone" {
		t.Errorf("sig reads %+v: want the outer reads cpu and zone, in order", sig.reads)
	}
	other := []memoRead{{agg: -1, name: "arch", v: strVal("2")}, {agg: -1, name: "zone", v: strVal("eu")}}
	if rd.internOuter(other) == sig {
		t.Error("reads of other variables with the same values share a sig")
	}
}

// A choice remembers the answer for eight sets of outer values; past them
// each set is compared every time, and every answer is the comparison's.
func TestOuterCheckAnswersPastWhatItRemembers(t *testing.T) {
	b := &binding{}
	b.push("zone", strVal("eu"))
	rd := &round{}
	var sigs []*outerSig
	for i := range 12 {
		sigs = append(sigs, rd.internOuter([]memoRead{{agg: -1, name: "zone", v: strVal(fmt.Sprintf("z%d", i))}}))
	}
	eu := rd.internOuter([]memoRead{{agg: -1, name: "zone", v: strVal("eu")}})
	sigs = append(sigs, eu)
	var oc outerCheck
	for pass := range 2 {
		for i, sig := range sigs {
			if got := oc.same(sig, b); got != (sig == eu) {
				t.Errorf("pass %d, set %d: same %v, want %v", pass, i, got, sig == eu)
			}
		}
	}
}

// Serving tries a candidate's kept outcomes in turn and moves the one it
// served to the front, so that the next visit tries it first: a node's
// visits alternate between a few outcomes.
func TestServeMovesTheServedOutcomeToTheFront(t *testing.T) {
	rd := &round{e: &Evaluator{}, ov: &overlay{}}
	outcome := func(zone string) *candOutcome {
		reads := []memoRead{{agg: -1, name: "zone", v: strVal(zone)}}
		return &candOutcome{reads: reads, outer: rd.internOuter(reads)}
	}
	us, eu, ap := outcome("us"), outcome("eu"), outcome("ap")
	os := []*candOutcome{us, ap, eu}
	for _, tc := range []struct {
		zone  string
		want  *candOutcome
		order []*candOutcome
	}{
		{"eu", eu, []*candOutcome{eu, us, ap}},
		{"eu", eu, []*candOutcome{eu, us, ap}},
		{"ap", ap, []*candOutcome{ap, eu, us}},
		{"us", us, []*candOutcome{us, ap, eu}},
		{"af", nil, []*candOutcome{us, ap, eu}}, // none served: the order stays
	} {
		b := &binding{}
		b.push("zone", strVal(tc.zone))
		c := &sol{b: b}
		lz := &lazyAggregates{rd: rd, s: c}
		var oc outerCheck
		got, _ := rd.serve(lz, &oc, c, os)
		if got != tc.want {
			t.Errorf("zone %s: served %v, want %v", tc.zone, got, tc.want)
		}
		for i := range os {
			if os[i] != tc.order[i] {
				t.Errorf("zone %s: outcome %d afterwards reads zone %s, want %s", tc.zone, i, os[i].reads[0].v.str, tc.order[i].reads[0].v.str)
			}
		}
	}
	if n := rd.e.stats.CandidatesReused; n != 4 {
		t.Errorf("%d candidates served, want 4", n)
	}
}

// An outcome that read an aggregate another outcome's lookup found with
// another value cannot be served: knownDiffers tells serve to pass over
// it without looking anything up.
func TestKnownDiffersOnlyOnALookedUpValue(t *testing.T) {
	l := &lazyAggregates{known: []knownAgg{{i: 0, v: celVal(types.Int(2))}, {i: 2, v: celVal(types.String("alive"))}}}
	for _, tc := range []struct {
		name  string
		reads []memoRead
		want  bool
	}{
		{"the same values", []memoRead{{agg: 0, v: celVal(types.Int(2))}, {agg: 2, v: celVal(types.String("alive"))}}, false},
		{"one differs", []memoRead{{agg: 0, v: celVal(types.Int(2))}, {agg: 2, v: celVal(types.String("dead"))}}, true},
		{"another kind", []memoRead{{agg: 0, v: celVal(types.Double(2))}}, true},
		{"one not looked up", []memoRead{{agg: 1, v: celVal(types.Int(7))}}, false},
		{"an outer variable", []memoRead{{agg: -1, name: "zone", v: strVal("eu")}}, false},
		{"nothing read", nil, false},
	} {
		if got := l.knownDiffers(tc.reads); got != tc.want {
			t.Errorf("%s: knownDiffers = %v, want %v", tc.name, got, tc.want)
		}
	}
}
