package eval

import (
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
}

// candidates is solve(sc, b, reads) for a choice's scope, from the round's
// memo when nothing it depends on was written since.
func (rd *round) candidates(sc *rules.Scope, b *binding, reads []Read) []*sol {
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
		n := b.len()
		solved := rd.solve(sc, b, nil)
		e = candEntry{writes: writes, sols: make([]candSol, len(solved))}
		for i, s := range solved {
			e.sols[i] = candSol{names: s.b.names[n:], vals: s.b.vals[n:], reads: s.reads}
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
	// Each use gets its own binding and reads: completing a candidate
	// pushes onto them.
	out := make([]*sol, len(e.sols))
	for i, c := range e.sols {
		bb := b.clone()
		for j, name := range c.names {
			bb.push(name, c.vals[j])
		}
		rs := make([]Read, 0, len(reads)+len(c.reads))
		rs = append(append(rs, reads...), c.reads...)
		out[i] = &sol{b: bb, reads: rs}
	}
	return out
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
