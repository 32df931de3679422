package eval

import (
	"encoding/binary"
	"math"
	"sort"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"github.com/ccattler/ccattler/rules"
)

// Placing the instances of one service visits the same nodes again and
// again: 100 instances sampling 64 of 1,000 nodes each visit a node six
// times on average, and each visit evaluated the same filters and score
// over the same values. A round keeps what a candidate's evaluation came
// to (its outcome) under what the evaluation read directly, and serves it
// again when the aggregates it read still hold the values they held.
//
// What a choice's filters and score read is, besides `now` (fixed for the
// round):
//
//   - the outer binding's values of the identifiers they name: keyed, as
//     one interned string per choose (outerKey);
//   - the candidate's own values: keyed by the candidate itself, an entry
//     of the round's candidate lists (candSol), which stands for the same
//     values for as long as the list does (candidates.go);
//   - the choice's aggregates, computed as CEL reads them: each is looked
//     up again as the evaluation would, in the order it did, and the
//     outcome is served only if every one has the value it had (sameVal).
//     Up to the first aggregate that differs, a fresh evaluation would
//     have read exactly what the replay read, so the aggregates looked up
//     and the candidate's member reads are the ones it would have had.
//
// The outcome is a function of these values alone, so a served outcome is
// the one a fresh evaluation gives; TestChoiceMemoChangesNothing holds
// plans with and without it equal. A choice with lets is not kept (a let
// may read an aggregate before the filters do, which the order above would
// have to follow through lets too).

// candKey is a candidate's outcome's key: the choice, its outer values
// (interned per round) and the candidate.
type candKey struct {
	ch    *rules.Choice
	outer int
	cand  *candSol
}

// candOutcome is what evaluating one candidate came to.
type candOutcome struct {
	aggs   []memoAgg // the aggregates CEL read, in the order it read them
	failed []string  // the filters it failed; nil: it passed every one
	score  float64
	keys   []ref.Val
}

// memoAgg is an aggregate a candidate's evaluation read (its index in the
// choice's scope) and the value it read.
type memoAgg struct {
	i int
	v ref.Val
}

// memoIdents returns the identifiers ch's filters, score and sort keys
// read, sorted; ok is false when its outcomes are not kept (it has lets,
// or the round computes no aggregate results to check them against).
func (e *Evaluator) memoIdents(ch *rules.Choice) ([]string, bool) {
	if e.noCandMemo || e.aggs.off || len(ch.Body.Lets) > 0 {
		return nil, false
	}
	if ids, ok := e.candIdents[ch]; ok {
		return ids, true
	}
	set := map[string]bool{}
	add := func(x *rules.Expr) {
		if x != nil && x.AST != nil {
			for n := range idents(x.AST.NativeRep().Expr()) {
				set[n] = true
			}
		}
	}
	for _, f := range ch.Filters {
		add(f.Expr)
	}
	add(ch.Pass)
	add(ch.Score)
	for _, k := range ch.Order {
		add(k.Expr)
	}
	ids := make([]string, 0, len(set))
	for n := range set {
		ids = append(ids, n)
	}
	sort.Strings(ids)
	if e.candIdents == nil {
		e.candIdents = map[*rules.Choice][]string{}
	}
	e.candIdents[ch] = ids
	return ids, true
}

// outerKey interns the values b gives the identifiers ch reads: the part
// of a candidate's outcome's key that is the same for every candidate of
// one choose. ok is false when ch's outcomes are not kept, or a value is
// not one sameVal compares (then every candidate is evaluated).
func (rd *round) outerKey(ch *rules.Choice, b *binding) (int, bool) {
	ids, ok := rd.e.memoIdents(ch)
	if !ok {
		return 0, false
	}
	k := rd.memoBuf[:0]
	for _, n := range ids {
		v, bound := b.get(n)
		if !bound {
			k = append(k, 0)
			continue
		}
		if k, ok = appendMemoVal(k, v.cel, v.str); !ok {
			return 0, false
		}
	}
	rd.memoBuf = k
	id, seen := rd.memoOuters[string(k)]
	if !seen {
		if rd.memoOuters == nil {
			rd.memoOuters = map[string]int{}
			rd.candOutcomes = map[candKey]*candOutcome{}
		}
		id = len(rd.memoOuters)
		rd.memoOuters[string(k)] = id
	}
	return id, true
}

// appendMemoVal appends a tagged, length-prefixed encoding of a bound value
// (c nil: the string s), or reports false for a kind it does not encode.
func appendMemoVal(k []byte, c ref.Val, s string) ([]byte, bool) {
	str := func(tag byte, s string) []byte {
		k = append(k, tag)
		k = binary.AppendUvarint(k, uint64(len(s)))
		return append(k, s...)
	}
	switch x := c.(type) {
	case nil:
		return str('s', s), true
	case types.String:
		return str('s', string(x)), true
	case types.Int:
		return binary.AppendVarint(append(k, 'i'), int64(x)), true
	case types.Uint:
		return binary.AppendUvarint(append(k, 'u'), uint64(x)), true
	case types.Double:
		return binary.AppendUvarint(append(k, 'd'), math.Float64bits(float64(x))), true
	case types.Bool:
		if x {
			return append(k, 'T'), true
		}
		return append(k, 'F'), true
	case types.Null:
		return append(k, 'n'), true
	case *types.Optional:
		if !x.HasValue() {
			return append(k, 'o'), true
		}
		return appendMemoVal(append(k, 'O'), x.GetValue(), "")
	}
	return k, false
}

// sameVal reports whether CEL cannot tell a and b apart: the same kind and
// the same value (doubles by their bits: -0 and 0 divide differently). A
// kind it does not know is never the same.
func sameVal(a, b ref.Val) bool {
	switch x := a.(type) {
	case types.Int:
		y, ok := b.(types.Int)
		return ok && x == y
	case types.Uint:
		y, ok := b.(types.Uint)
		return ok && x == y
	case types.Double:
		y, ok := b.(types.Double)
		return ok && math.Float64bits(float64(x)) == math.Float64bits(float64(y))
	case types.String:
		y, ok := b.(types.String)
		return ok && x == y
	case types.Bool:
		y, ok := b.(types.Bool)
		return ok && x == y
	case types.Null:
		_, ok := b.(types.Null)
		return ok
	case *types.Optional:
		y, ok := b.(*types.Optional)
		if !ok || x.HasValue() != y.HasValue() {
			return false
		}
		return !x.HasValue() || sameVal(x.GetValue(), y.GetValue())
	}
	return false
}

// replay serves candidate c's kept outcome: it looks up the aggregates the
// outcome read, in order, as the evaluation would have, and reports
// whether each still has the value it had. When one does not, c is left
// as it was begun, to be evaluated.
func (rd *round) replay(lz *lazyAggregates, c *sol, o *candOutcome) bool {
	base := c.b.len()
	for _, a := range o.aggs {
		ag := lz.sc.Aggregates[a.i]
		v, rs, err := rd.aggs.lookup(ag, c)
		if err != nil || !sameVal(v, a.v) {
			c.b.truncate(base)
			lz.begin(c)
			return false
		}
		if rs == nil {
			rs = []Read{} // computed: not nil
		}
		lz.reads[a.i] = rs
		c.b.push(ag.Name, celVal(v))
	}
	rd.e.stats.CandidatesReused++
	return true
}
