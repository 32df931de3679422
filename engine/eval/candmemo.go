package eval

import (
	"encoding/binary"
	"math"
	"math/bits"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"github.com/ccattler/ccattler/rules"
)

// Placing the instances of services visits the same nodes again and again:
// a round placing 5,000 instances on 1,000 nodes, 64 sampled each, visits
// every node 320 times, and each visit evaluated the filters and score
// over values mostly the same as the last. A round keeps what each
// candidate's evaluation came to (its outcome) with what the evaluation
// read, in the order it read it, and serves the outcome again when
// everything read still has the value it had.
//
// What a choice's filters and score read is, besides `now` (fixed for the
// round):
//
//   - the candidate's own values: the outcome is kept with the candidate,
//     an entry of the round's candidate lists (candSol), which stands for
//     the same values for as long as the list does (candidates.go);
//   - the outer binding's values of the identifiers the evaluation
//     resolved (traced as CEL resolves them: `!colo.orValue(false) ||
//     placed_siblings == 0` reads the count only for a colocated service,
//     and a service's placed count changes with each of its placements);
//   - the choice's aggregates, computed as CEL reads them: each is looked
//     up again as the evaluation would, in the order it did; one whose
//     group the candidate alone names and no change has touched since
//     (groupvers.go) is not, and is looked up only for the candidate
//     chosen.
//
// The outcome is a function of these values alone, and the same values
// lead an evaluation to the same reads in the same order, so a served
// outcome is the one a fresh evaluation gives, with the same aggregates
// looked up; TestCandidateMemoChangesNothing holds plans equal with and
// without it. A choice with lets is not kept (a let may read an aggregate
// before the filters do, which the order above would have to follow
// through lets too).

// candKey keys the outcomes of one choice's candidates: the candidates are
// a list of the round's (candidates.go), named by its first, and each
// candidate's outcomes are kept at its place in the list.
type candKey struct {
	ch    *rules.Choice
	first *candSol
}

// maxOutcomes is how many outcomes a round keeps for one candidate: the
// last ones found under different outer values (services that request
// different resources, a zone, an architecture), the newest first.
const maxOutcomes = 4

// candOutcome is what evaluating one candidate came to, and what it read.
type candOutcome struct {
	reads  []memoRead // in the order the evaluation read them
	outer  *outerSig  // the outer variables among reads, shared (internOuter)
	failed []string   // the filters it failed; nil: it passed every one
	score  float64
	keys   []ref.Val
}

// outerSig is the outer variables an outcome read, with their values, in
// the order it read them. Outcomes that read the same ones share one
// (internOuter): a choice serves 64 candidates under one outer binding,
// and comparing each one's outer values again was a tenth of what placing
// an instance cost; a choice compares each sig once (outerCheck).
type outerSig struct{ reads []memoRead }

// internOuter returns the round's sig of the outer reads among reads,
// the same one for every outcome that read the same variables with the
// same values in the same order. A value the key cannot spell (a list, a
// map: never the same to sameVal) gets a sig of its own.
func (rd *round) internOuter(reads []memoRead) *outerSig {
	k := rd.outerKey[:0]
	n := 0
	for _, r := range reads {
		if r.agg >= 0 {
			continue
		}
		n++
		k = binary.AppendUvarint(k, uint64(len(r.name)))
		k = append(k, r.name...)
		var ok bool
		if k, ok = appendBoundKey(k, r.v); !ok {
			rd.outerKey = k
			return &outerSig{reads: outerOnly(reads, n)}
		}
	}
	rd.outerKey = k
	if sig, ok := rd.outerSigs[string(k)]; ok {
		return sig
	}
	if rd.outerSigs == nil {
		rd.outerSigs = map[string]*outerSig{}
	}
	sig := &outerSig{reads: outerOnly(reads, n)}
	rd.outerSigs[string(k)] = sig
	return sig
}

// outerOnly copies the n outer reads among reads.
func outerOnly(reads []memoRead, n int) []memoRead {
	out := make([]memoRead, 0, n)
	for _, r := range reads {
		if r.agg < 0 {
			out = append(out, r)
		}
	}
	return out
}

// appendBoundKey appends a spelling of v to k such that two values spelt
// alike are the same to sameBound against any third; false for a value it
// cannot spell.
func appendBoundKey(k []byte, v val) ([]byte, bool) {
	if v.cel == nil {
		k = append(k, 's')
		k = binary.AppendUvarint(k, uint64(len(v.str)))
		return append(k, v.str...), true
	}
	if s, ok := v.cel.(types.String); ok { // sameBound compares str with a string bound without its CEL form
		k = append(k, 'S')
		k = binary.AppendUvarint(k, uint64(len(s)))
		k = append(k, s...)
		k = binary.AppendUvarint(k, uint64(len(v.str)))
		return append(k, v.str...), true
	}
	return appendCELKey(k, v.cel)
}

// appendCELKey spells c as sameVal tells values apart.
func appendCELKey(k []byte, c ref.Val) ([]byte, bool) {
	switch x := c.(type) {
	case types.Int:
		return binary.AppendVarint(append(k, 'i'), int64(x)), true
	case types.Uint:
		return binary.AppendUvarint(append(k, 'u'), uint64(x)), true
	case types.Double:
		return binary.LittleEndian.AppendUint64(append(k, 'd'), math.Float64bits(float64(x))), true
	case types.Bool:
		if x {
			return append(k, 'T'), true
		}
		return append(k, 'F'), true
	case types.Null:
		return append(k, 'n'), true
	case *types.Optional:
		if !x.HasValue() {
			return append(k, 'o', 0), true
		}
		return appendCELKey(append(k, 'o', 1), x.GetValue())
	}
	return k, false
}

// outerCheck remembers, for one choice, which sigs its outer binding
// gives the values they read: the candidates' outcomes share a few.
type outerCheck struct {
	n    int
	sigs [8]*outerSig
	ok   [8]bool
}

// same reports whether b gives each outer variable sig read the value it
// read, comparing a sig once per choice (b's outer values are the
// choice's, the same for every candidate).
func (oc *outerCheck) same(sig *outerSig, b *binding) bool {
	for i := range oc.n {
		if oc.sigs[i] == sig {
			return oc.ok[i]
		}
	}
	ok := sameOuter(sig.reads, b)
	if oc.n < len(oc.sigs) {
		oc.sigs[oc.n], oc.ok[oc.n] = sig, ok
		oc.n++
	}
	return ok
}

// memoRead is one value a candidate's evaluation read: an aggregate of the
// choice's scope (agg, its index) or else an outer variable (name).
type memoRead struct {
	agg  int // -1: the outer variable name
	name string
	v    val
	st   groupStamp // an aggregate's group as the read saw it (groupvers.go)
}

// outcomes returns the kept outcomes of ch's candidates cands, by the
// candidates' places in the list; nil when ch's outcomes are not kept (it
// has lets, or the round computes no aggregate results to check them
// against).
func (rd *round) outcomes(ch *rules.Choice, cands candList) [][]*candOutcome {
	if rd.e.noCandMemo || rd.e.aggs.off || len(ch.Body.Lets) > 0 || len(cands.sols) == 0 {
		return nil
	}
	k := candKey{ch: ch, first: &cands.sols[0]}
	os := rd.candOutcomes[k]
	if os == nil {
		if rd.candOutcomes == nil {
			rd.candOutcomes = map[candKey][][]*candOutcome{}
		}
		os = make([][]*candOutcome, len(cands.sols))
		rd.candOutcomes[k] = os
	}
	return os
}

// keepOutcome keeps o first among a candidate's outcomes.
func keepOutcome(os []*candOutcome, o *candOutcome) []*candOutcome {
	if len(os) < maxOutcomes {
		os = append(os, nil)
	}
	copy(os[1:], os)
	os[0] = o
	return os
}

// sameVal reports whether CEL cannot tell a and b apart: the same kind and
// the same value (doubles by their bits: -0 and 0 divide differently). A
// kind it does not know (a list, a map, a timestamp) is never the same.
func sameVal(a, b ref.Val) bool {
	switch x := a.(type) {
	case types.Int, types.Uint, types.String, types.Bool, types.Null:
		return a == b // comparable: the same type and value
	case types.Double:
		y, ok := b.(types.Double)
		return ok && math.Float64bits(float64(x)) == math.Float64bits(float64(y))
	case *types.Optional:
		y, ok := b.(*types.Optional)
		if !ok || x.HasValue() != y.HasValue() {
			return false
		}
		return !x.HasValue() || sameVal(x.GetValue(), y.GetValue())
	}
	return false
}

// sameBound is sameVal for bound values, strings compared without their
// CEL form (a string a join bound has none until CEL reads it).
func sameBound(a, b val) bool {
	if a.cel == nil || b.cel == nil {
		return a.isString() && b.isString() && a.str == b.str
	}
	return sameVal(a.cel, b.cel)
}

// serve looks for an outcome of candidate c it can serve: one whose outer
// reads c's binding gives the same values, and whose aggregates still have
// the values they had. An aggregate of a group no change has touched since
// it was read (groupvers.go) is not looked up: it is noted in unread, by
// its index, and looked up only if c is chosen (chosen). The others are
// looked up again in order as the evaluation would have, and compared. It
// traces what it reads (lz.tracing is set): when an aggregate differs, the
// evaluation that follows reads those looked up from c, the differing one
// with its new value, in the order a fresh one reads them (the same values
// lead it to the same lookups, up to the one that differs; one not looked
// up is looked up when the evaluation reads it, from the group it read,
// unchanged). When a lookup fails, c is left as it was begun.
//
// The kept outcomes are tried in turn, the one served last first: a
// node's candidates alternate between a few outcomes (the scheduler's
// spread count of a service with an instance on the node, and of those
// without), and the newest is often the other one's. Before the next is
// tried c begins again, so that what it traces is one outcome's prefix; an
// aggregate already looked up for c is taken from lz.known, and an outcome
// that read another value of it is passed over.
func (rd *round) serve(lz *lazyAggregates, oc *outerCheck, c *sol, os []*candOutcome) (o *candOutcome, unread uint64) {
	base := c.b.len()
	again := func() { c.b.truncate(base); lz.begin(c); lz.trace = lz.trace[:0] }
	lz.known = lz.known[:0]
	begun := false
	for at, k := range os {
		if !oc.same(k.outer, c.b) || (begun && lz.knownDiffers(k.reads)) {
			continue
		}
		if begun {
			// An outcome before this one read an aggregate whose value
			// differs now: c begins again, and the aggregates looked up
			// for it are served from lz.known.
			again()
		}
		begun = true
		ok, un, err := rd.still(lz, c, k)
		if err != nil {
			again()
			return nil, 0 // the evaluation reports it
		}
		if ok {
			// Served first next time: the candidates of a choice
			// alternate between a few outcomes (a service with an
			// instance on the node and those without).
			copy(os[1:at+1], os[:at])
			os[0] = k
			rd.e.stats.CandidatesReused++
			rd.e.stats.UnreadAggregates += int64(bits.OnesCount64(un))
			return k, un
		}
	}
	return nil, 0 // the evaluation goes on from the trace
}

// still reports whether every aggregate o read still has the value it
// read, looking each up (or taking it from lz.known) in the order o read
// it, as the evaluation would; unread are those serve need not look up
// (their groups unchanged since o read them).
func (rd *round) still(lz *lazyAggregates, c *sol, o *candOutcome) (ok bool, unread uint64, err error) {
	stamps := rd.ov.rec == nil // reads recorded for a result being computed are looked up
	for _, r := range o.reads {
		if r.agg < 0 {
			lz.trace = append(lz.trace, r)
			continue
		}
		if stamps && r.agg < 64 && rd.aggs.unchanged(r.st) {
			unread |= 1 << r.agg
			continue
		}
		cv, err := lz.computeKnown(r.agg)
		if err != nil {
			return false, 0, err
		}
		if !sameVal(cv.cel, r.v.cel) {
			return false, 0, nil
		}
	}
	return true, unread, nil
}

// sameOuter reports whether b gives each outer variable among reads the
// value read.
func sameOuter(reads []memoRead, b *binding) bool {
	for _, r := range reads {
		if r.agg >= 0 {
			continue
		}
		v, ok := b.get(r.name)
		if !ok || !sameBound(v, r.v) {
			return false
		}
	}
	return true
}
