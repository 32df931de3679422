package eval

import (
	"sort"
	"strings"

	"github.com/ccattler/ccattler/rules"
)

// A choice's candidates are the solutions of its scope, and they depend
// only on the scope's outer variables and on the facts of the types its
// patterns read. Placing I instances on N nodes solves the same N
// candidates I times over (every pending instance sees the same nodes), so
// a round keeps them: keyed by the outer variables' values, valid while the
// round writes no fact of those types. A placement is not one of them: the
// candidates survive the whole scheduling round, and only the aggregates
// (cached separately) and the filters are evaluated per instance.

// candEntry is the candidates of one scope under one set of outer values,
// each as what it adds to the outer binding and reads.
type candEntry struct {
	writes int // the overlay's writes of the scope's types when it was solved
	sols   []candSol
}

type candSol struct {
	names []string
	vals  []val
	reads []Read
	order string // the values of the choice's variables, its visiting order
}

// candList is a choice's candidates for one outer binding, in visiting
// order. A candidate's binding and reads are built only when it is visited
// (at): a bounded choice visits a sample of them, and each use gets its own.
type candList struct {
	b     *binding
	reads []Read
	sols  []candSol
	room  int // what a candidate's binding takes beyond its own: the scope's aggregates and lets
}

func (l candList) len() int { return len(l.sols) }

// at returns the i-th candidate as the outer binding and reads extended by
// what the candidate binds and read, built in the storage of spare (a
// candidate of this list passed over) when there is one: placing an
// instance visits 64 candidates and keeps one, and building each afresh
// was a tenth of what a scheduling round allocated. A spare begins with
// the outer binding and reads already, which nothing visiting a candidate
// writes (its lets, aggregates and reads go after them), so only the
// candidate's own are written again: copying the outer ones for every
// candidate, at took a seventh of the large preset's choosing (4.1 of
// 28.8 s).
func (l candList) at(i int, spare *sol) *sol {
	c := l.sols[i]
	if spare == nil {
		// With room for the choice's aggregates and lets: grown by
		// their pushes instead, a candidate's binding was copied again
		// for every best candidate kept.
		spare = &sol{b: l.b.cloneRoom(len(c.names) + l.room)}
		spare.reads = append(make([]Read, 0, len(l.reads)+len(c.reads)), l.reads...)
	}
	n := len(l.b.names)
	spare.b.names = append(spare.b.names[:n], c.names...)
	spare.b.vals = append(spare.b.vals[:n], c.vals...)
	spare.reads = append(spare.reads[:len(l.reads)], c.reads...)
	spare.key = ""
	return spare
}

// candidates is solve(sc, b, reads) for a choice's scope, from the round's
// memo when nothing it depends on was written since, ordered by the values
// of vars (stable: ties keep the order solve found them in).
func (rd *round) candidates(sc *rules.Scope, vars []string, b *binding, reads []Read) candList {
	var k strings.Builder
	for _, v := range sc.Outer {
		if x, ok := b.get(v); ok {
			k.WriteString(x.str)
		} else {
			k.WriteByte(1) // unbound: distinct from every value
		}
		k.WriteByte(0)
	}
	key := k.String()
	writes := rd.scopeWrites(sc)
	memo := rd.candMemo[sc]
	e, ok := memo[key]
	if !ok || e.writes != writes {
		// Kept from an earlier round (candkeep.go) while this one has
		// written none of the scope's facts.
		e = candEntry{writes: writes}
		keep, found := writes == 0 && !rd.e.noKeptCands, false
		if keep {
			e.sols, found = rd.e.cands.get(sc, key)
		}
		if found {
			rd.e.stats.CandidatesKept++
		} else {
			e.sols = rd.solveCandidates(sc, vars, b)
			if keep {
				rd.e.cands.put(sc, key, e.sols)
			}
		}
		if memo == nil {
			if rd.candMemo == nil {
				rd.candMemo = map[*rules.Scope]map[string]candEntry{}
			}
			memo = map[string]candEntry{}
			rd.candMemo[sc] = memo
		}
		memo[key] = e
	}
	return candList{b: b, reads: reads, sols: e.sols, room: len(sc.Aggregates) + len(sc.Lets)}
}

// solveCandidates is solve(sc, b, nil), each solution as what it adds to
// b, ordered by the values of vars (stable: ties keep solve's order).
func (rd *round) solveCandidates(sc *rules.Scope, vars []string, b *binding) []candSol {
	n := b.len()
	solved := rd.solve(sc, b, nil)
	sols := make([]candSol, len(solved))
	for i, s := range solved {
		var o strings.Builder
		for _, v := range vars {
			o.WriteString(s.b.str(v))
			o.WriteByte(0)
		}
		sols[i] = candSol{names: s.b.names[n:], vals: s.b.vals[n:], reads: s.reads, order: o.String()}
	}
	sort.SliceStable(sols, func(i, j int) bool { return sols[i].order < sols[j].order })
	return sols
}

// scopeWrites counts the round's writes of the fact types sc's patterns read.
func (rd *round) scopeWrites(sc *rules.Scope) int {
	n := 0
	for _, ps := range [][]*rules.Pattern{sc.Match, sc.Optional, sc.Absent} {
		for _, p := range ps {
			n += rd.ov.writes[p.Type]
		}
	}
	return n
}
