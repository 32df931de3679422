package eval

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"github.com/ccattler/ccattler/rules"
)

// ranked is a choice's candidate that passed every filter, with what
// orders it.
type ranked struct {
	c     *sol
	score float64
	keys  []ref.Val // the order's keys, when the choice has an order
	reads [][]Read  // by aggregate: the member reads of those its filters and order read
	seq   int       // visiting order, the tie-break
	// unread: the aggregates its served outcome read that serving did not
	// look up (serve), by index; chosen looks them up.
	unread uint64
	served *candOutcome
}

// choose picks the best candidates of the rule's choice for s, as many as
// its pick says (one by default), best first, recording a rejection for
// every candidate that fails a filter.
//
// A candidate's aggregates are computed when a filter, the score or a sort
// key first reads one: `nnet.orValue(”) != 'host' || port_taken == 0`
// computes the port count only on nodes that share their network. A chosen
// one's reads are the members of the aggregates its filters and ranking
// read, in declaration order, and of those the rule's heads read (computed
// for it alone): what the decision depended on, no more.
func (rd *round) choose(r *rules.Rule, s *sol) ([]*sol, error) {
	ch := r.Choose
	k, err := rd.pickCount(ch, s)
	if err != nil || k == 0 {
		return nil, err
	}
	cands := rd.candidates(ch.Body, ch.Vars, s.b, s.reads)
	lz := &lazyAggregates{rd: rd, sc: ch.Body, reads: make([][]Read, len(ch.Body.Aggregates))}
	act := &activation{lazy: lz}
	var outer map[string]string // the outer binding's values, made for the first rejection
	start, feasible := 0, 0
	n := cands.len()
	sample := sampleSize(ch)
	if sample > 0 && n > sample {
		start = sampleStart(s.b, n)
	}
	// With one to pick, the best so far is kept and the others' storage
	// reused; with more, the passing candidates are kept and cut back to
	// the best k whenever they reach twice that.
	var best ranked
	best.reads = make([][]Read, len(ch.Body.Aggregates))
	var cur ranked
	var kept []ranked
	rk := ranker{ch: ch}
	outcomes := rd.outcomes(ch, cands) // nil: not kept
	var oc outerCheck
	lz.outer = cands.b.len()
	var spare *sol // a candidate passed over, whose storage the next one reuses
	for i := range n {
		if sample > 0 && feasible >= sample {
			break // the sample is complete
		}
		at := (start + i) % n
		c := cands.at(at, spare)
		spare = nil
		lz.begin(c)
		// The outcome the round found for this candidate before, when
		// the outer variables and aggregates it read still have the
		// values it read (candmemo.go).
		var served *candOutcome
		var unread uint64
		if outcomes != nil {
			lz.tracing, lz.trace = true, lz.trace[:0]
			served, unread = rd.serve(lz, &oc, c, outcomes[at])
			lz.tracing = served == nil
		}
		var failed []string
		if served != nil {
			failed = served.failed
		} else {
			for _, l := range ch.Body.Lets {
				v, err := rd.evalIn(act, l.Expr, c.b, what{"let", l.Name, ""})
				if err != nil {
					return nil, err
				}
				c.b.push(l.Name, celVal(v))
			}
			if !rd.passes(act, ch, c) {
				for _, f := range ch.Filters {
					ok, err := rd.evalBoolIn(act, f.Expr, c.b, what{"filter", f.Name, ""})
					if err != nil {
						return nil, err
					}
					if !ok {
						failed = append(failed, f.Name)
					}
				}
			}
			// A rejected candidate's outcome is complete; a passing one's
			// is kept once it is ranked (what ranking reads is traced on).
			if outcomes != nil && len(failed) > 0 {
				outcomes[at] = keepOutcome(outcomes[at], &candOutcome{reads: lz.keptTrace(), outer: rd.internOuter(lz.trace), failed: failed})
			}
		}
		if len(failed) > 0 {
			cand := map[string]string{}
			for _, v := range ch.Vars {
				cand[v] = c.b.str(v)
			}
			if outer == nil {
				outer = s.b.strings()
			}
			rd.reject(Rejection{Rule: r.Name, Bindings: outer, Candidate: cand, Filters: failed})
			spare = c
			continue
		}
		cur.c, cur.seq, cur.score, cur.keys, cur.unread, cur.served = c, i, 0, cur.keys[:0], unread, served
		if served != nil {
			cur.score, cur.keys = served.score, append(cur.keys, served.keys...)
		} else {
			if err := rd.rank(act, ch, &cur); err != nil {
				return nil, err
			}
			if outcomes != nil {
				outcomes[at] = keepOutcome(outcomes[at], &candOutcome{reads: lz.keptTrace(), outer: rd.internOuter(lz.trace), score: cur.score, keys: slices.Clone(cur.keys)})
			}
		}
		feasible++
		if k > 1 {
			cur.reads = append([][]Read(nil), lz.reads...)
			kept = append(kept, cur)
			cur = ranked{}
			if len(kept) >= 2*k {
				kept = rk.best(kept, k)
			}
			continue
		}
		if best.c == nil || rk.before(&cur, &best) {
			spare = best.c
			best.c, best.seq, best.score, best.unread, best.served = cur.c, cur.seq, cur.score, cur.unread, cur.served
			best.keys, cur.keys = cur.keys, best.keys
			lz.reads, best.reads = best.reads, lz.reads
		} else {
			spare = c
		}
	}
	if k == 1 {
		if best.c == nil {
			return nil, nil
		}
		if err := rd.chosen(ch, &best); err != nil {
			return nil, err
		}
		rd.one[0] = best.c
		return rd.one[:], nil
	}
	kept = rk.best(kept, k)
	if rk.err != nil {
		return nil, rk.err
	}
	out := make([]*sol, 0, len(kept))
	for i := range kept {
		if err := rd.chosen(ch, &kept[i]); err != nil {
			return nil, err
		}
		out = append(out, kept[i].c)
	}
	return out, nil
}

// passes reports whether candidate c passes every filter of ch by their
// conjunction (rules.Choice.Pass) alone. False says nothing: the filters
// are then evaluated one by one, to name those that reject c or to report
// the error. A conjunction that holds read what the filters would: each
// filter was evaluated whole, left to right, as alone.
func (rd *round) passes(act *activation, ch *rules.Choice, c *sol) bool {
	if ch.Pass == nil || !c.b.within(rules.FastSize) {
		return false // beyond what Fast takes, the program counts its cost, and would count it twice
	}
	ok, err := rd.evalBoolIn(act, ch.Pass, c.b, what{"filters", ch.Name, ""})
	return err == nil && ok
}

// chosen completes a picked candidate: the aggregates its heads read that
// no filter or key computed, and the member reads of those it read.
func (rd *round) chosen(ch *rules.Choice, p *ranked) error {
	c := p.c
	if p.unread != 0 {
		// What serving it did not look up, in the order it was read.
		for _, r := range p.served.reads {
			if r.agg < 0 || p.unread&(1<<r.agg) == 0 { // 1<<64 and past: 0
				continue
			}
			ag := ch.Body.Aggregates[r.agg]
			cv, rs, err := rd.aggregate(ag, c)
			if err != nil {
				return err
			}
			if !sameVal(cv.cel, r.v.cel) {
				return fmt.Errorf("choice %q: aggregate %s is %v, its kept outcome read %v: a change its group's version missed", ch.Name, ag.Name, cv.cel, r.v.cel)
			}
			p.reads[r.agg] = rs
			c.b.push(ag.Name, cv)
		}
	}
	heads := rd.e.aggs.heads[ch]
	for i, ag := range ch.Body.Aggregates {
		if p.reads[i] != nil || !heads[i] {
			continue
		}
		cv, rs, err := rd.aggregate(ag, c)
		if err != nil {
			return err
		}
		p.reads[i] = rs
		c.b.push(ag.Name, cv)
	}
	for _, rs := range p.reads {
		c.reads = append(c.reads, rs...)
	}
	return nil
}

// ranker orders a choice's passing candidates.
type ranker struct {
	ch  *rules.Choice
	err error // the first pair of sort keys that did not compare
}

// before reports whether a comes before b: by the order's keys, or the
// higher score; then in visiting order, the tie-break.
func (rk *ranker) before(a, b *ranked) bool {
	if rk.ch.Order != nil {
		for j, key := range rk.ch.Order {
			c, err := compareKeys(a.keys[j], b.keys[j])
			if err != nil {
				if rk.err == nil {
					rk.err = fmt.Errorf("order %q: %w", key.Expr.Src, err)
				}
				return a.seq < b.seq
			}
			if c != 0 {
				return (c < 0) != key.Desc
			}
		}
	} else if a.score != b.score {
		return a.score > b.score
	}
	return a.seq < b.seq
}

// best sorts kept and cuts it to its first k.
func (rk *ranker) best(kept []ranked, k int) []ranked {
	sort.Slice(kept, func(i, j int) bool { return rk.before(&kept[i], &kept[j]) })
	if len(kept) > k {
		clear(kept[k:])
		kept = kept[:k]
	}
	return kept
}

// SampleSize is how many candidates that pass the filters a choice scores
// when it asks for a good candidate, not the first of all (a score, one
// pick, no order, no exact = true: rules.Choice.Exact). With N candidates
// a round placing I instances then costs about I × SampleSize candidate
// evaluations instead of I × N; up to SampleSize candidates every one is
// scored, so a small cluster gets the best node. 64 is past what a
// best-of-sample gains from more: the chance that none of the best 5 % of
// the nodes is in a sample of 64 is under 4 %.
const SampleSize = 64

// sampleSize is how many passing candidates ch scores: its own
// candidates = N, every one (0) when it asks for an exact ranking, else
// SampleSize.
func sampleSize(ch *rules.Choice) int {
	switch {
	case ch.Candidates > 0:
		return ch.Candidates
	case ch.Exact:
		return 0
	}
	return SampleSize
}

// pickCount evaluates how many candidates a choice picks for s.
func (rd *round) pickCount(ch *rules.Choice, s *sol) (int, error) {
	if ch.Pick == nil {
		return 1, nil
	}
	v, err := rd.eval(ch.Pick, s.b, what{"pick of", ch.Name, ""})
	if err != nil {
		return 0, err
	}
	n, ok := v.(types.Int)
	if !ok {
		return 0, fmt.Errorf("pick %q: got %s, expected an int", ch.Pick.Src, v.Type())
	}
	if n < 0 {
		return 0, fmt.Errorf("pick %q is %d; expected how many candidates to pick, 0 or more", ch.Pick.Src, n)
	}
	return int(min(int64(n), math.MaxInt32)), nil
}

// rank evaluates what orders a passing candidate: its sort keys, or its score.
func (rd *round) rank(act *activation, ch *rules.Choice, c *ranked) error {
	for _, key := range ch.Order {
		v, err := rd.evalIn(act, key.Expr, c.c.b, what{kind: "order key"})
		if err != nil {
			return err
		}
		if _, ok := v.(traits.Comparer); !ok {
			return fmt.Errorf("order %q: got %s, which does not sort", key.Expr.Src, v.Type())
		}
		c.keys = append(c.keys, v)
	}
	if ch.Score == nil {
		return nil
	}
	v, err := rd.evalIn(act, ch.Score, c.c.b, what{kind: "score"})
	if err != nil {
		return err
	}
	switch x := v.(type) {
	case types.Int:
		c.score = float64(x)
	case types.Double:
		c.score = float64(x)
	case types.Uint:
		c.score = float64(x)
	default:
		return fmt.Errorf("score %q: got %s, expected a number", ch.Score.Src, v.Type())
	}
	return nil
}

// compareKeys compares two sort keys' values: negative, 0 or positive.
func compareKeys(a, b ref.Val) (int, error) {
	c, ok := a.(traits.Comparer)
	if !ok {
		return 0, fmt.Errorf("%s values do not sort", a.Type())
	}
	x, ok := c.Compare(b).(types.Int)
	if !ok {
		return 0, fmt.Errorf("cannot compare %s with %s", a.Type(), b.Type())
	}
	return int(x), nil
}
