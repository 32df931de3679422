package eval

import (
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// patInfo is what the planner precomputes about a pattern's template.
type patInfo struct {
	p        *rules.Pattern
	varPos   []int    // per segment: the fact type's variable position there, -1 for a schema literal
	leadLits int      // segments before the fact type's first variable
	hint     []string // the only values the guard lets through (rules.Scope.Hints)
}

func newPatInfo(p *rules.Pattern) *patInfo {
	pi := &patInfo{p: p, varPos: make([]int, len(p.Segs)), leadLits: -1}
	pos := 0
	for i, sg := range p.Type.Segments {
		if sg.Var == "" {
			pi.varPos[i] = -1
			continue
		}
		if pi.leadLits < 0 {
			pi.leadLits = i
		}
		pi.varPos[i] = pos
		pos++
	}
	if pi.leadLits < 0 {
		pi.leadLits = len(p.Segs)
	}
	return pi
}

func (e *Evaluator) info(p *rules.Pattern) *patInfo {
	pi, ok := e.pats[p]
	if !ok {
		pi = newPatInfo(p)
		e.pats[p] = pi
	}
	return pi
}

// access paths, cheapest first.
const (
	accGet = iota
	accPrefix
	accByVar
	accByValue
	accHint
	accScan
)

// known returns the value of segment i under b, if known.
func known(p *rules.Pattern, i int, b *binding) (string, bool) {
	sg := p.Segs[i]
	if sg.Var == "" {
		return sg.Lit, true
	}
	v, ok := b.get(sg.Var)
	return v.str, ok
}

// plan picks the access path of p under b: a Get when every segment is
// known, a prefix scan when leading variables are, an index by a later
// variable or by the value, and a scan of the fact type only as a last resort.
func (e *Evaluator) plan(p *rules.Pattern, b *binding) (acc, seg int, arg string) {
	pi := e.info(p)
	lead := 0
	for lead < len(p.Segs) {
		if _, ok := known(p, lead, b); !ok {
			break
		}
		lead++
	}
	if lead == len(p.Segs) {
		return accGet, 0, ""
	}
	if lead > pi.leadLits {
		parts := make([]string, lead)
		for i := range parts {
			parts[i], _ = known(p, i, b)
		}
		return accPrefix, lead, strings.Join(parts, "/") + "/"
	}
	for i := range p.Segs {
		if pi.varPos[i] >= 1 {
			if v, ok := known(p, i, b); ok {
				return accByVar, i, v
			}
		}
	}
	if p.Alias != "" {
		if v, ok := b.get(p.Alias); ok {
			if v.isString() {
				return accByValue, 0, v.str
			}
		}
	}
	if pi.hint != nil {
		return accHint, 0, ""
	}
	return accScan, 0, ""
}

// scan visits the facts that may match p under b, by the planned access path.
func (rd *round) scan(p *rules.Pattern, b *binding, fn visitor) {
	acc, seg, arg := rd.e.plan(p, b)
	ov := rd.ov
	counted := func(f facts.Fact, own bool) bool {
		rd.e.stats.FactsVisited++
		return fn(f, own)
	}
	switch acc {
	case accGet:
		if _, f, ok, own := ov.getPattern(p, b); ok {
			counted(f, own)
		}
	case accPrefix:
		ov.prefix(arg, counted)
	case accByVar:
		ov.byVar(p.Type, rd.e.info(p).varPos[seg], seg, arg, counted)
	case accByValue:
		ov.byValue(p.Type, arg, counted)
	case accHint:
		more := true
		for _, v := range rd.e.info(p).hint {
			ov.byValue(p.Type, v, func(f facts.Fact, own bool) bool {
				more = counted(f, own)
				return more
			})
			if !more {
				return
			}
		}
	default:
		rd.e.stats.TypeScans++
		ov.ofType(p.Type, counted)
	}
}

// bindFact matches f against p under b, pushing the variables and the
// alias it binds. On false the caller truncates b.
func (rd *round) bindFact(p *rules.Pattern, f facts.Fact, b *binding) bool {
	n := strings.Count(f.Key, "/") + 1
	if n != len(p.Segs) {
		return false
	}
	if f.Invalid != "" {
		// A fact that breaks the schema is absent for every rule: a
		// key of no valid form met by a prefix scan, a bad value, a
		// lease key on no etcd lease.
		rd.e.stats.BadValues++
		return false
	}
	rest := f.Key
	for i := range p.Segs {
		var part string
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			part, rest = rest[:j], rest[j+1:]
		} else {
			part, rest = rest, ""
		}
		if v, ok := known(p, i, b); ok {
			if v != part {
				return false
			}
			continue
		}
		b.push(p.Segs[i].Var, strVal(part))
	}
	if p.Alias == "" {
		return true
	}
	v, err := rd.e.values.decodeFact(p.Type, f)
	if err != nil {
		rd.e.stats.BadValues++
		return false
	}
	if old, ok := b.get(p.Alias); ok {
		return old.str == v.str
	}
	b.push(p.Alias, v)
	return true
}

// join enumerates the bindings of pats extending b, calling fn with b and
// reads extended; fn returns false to stop. Patterns are taken cheapest
// access path first, re-planned after each binds more variables.
func (rd *round) join(pats []*rules.Pattern, b *binding, reads *[]Read, fn func() bool) bool {
	used := make([]bool, len(pats))
	var step func(left int) bool
	step = func(left int) bool {
		if left == 0 {
			return fn()
		}
		best, bestAcc, bestN, bestKind := -1, 0, 0, 0
		for i, p := range pats {
			if used[i] {
				continue
			}
			acc, seg, arg := rd.e.plan(p, b)
			n, kind := 0, 0
			switch {
			case acc == accByVar || acc == accByValue:
				// Two index lookups: the one that visits fewer facts first.
				// Port clashes, say: the node's ten placements, not the
				// hundred services exposing the same port.
				n = rd.ov.count(p.Type, acc, rd.e.info(p).varPos[seg], seg, arg)
				acc = accByVar
			case (acc == accHint || acc == accScan) && rd.ov.rec == nil:
				// A lookup by the values a condition allows, or a scan of
				// the fact type, is weighed by the facts it visits too: a
				// rare type's are fewer than an index lookup's, and a rule
				// over failed instances starts from the few failed, not
				// from every service's instances. On a tie the index
				// lookup goes first, then the values. (Not while an
				// aggregate records what it reads: there a scan depends
				// on every fact of its type, a lookup on its own.)
				if acc == accHint {
					for _, v := range rd.e.info(p).hint {
						n += rd.ov.count(p.Type, accByValue, 0, 0, v)
					}
					kind = 1
				} else {
					n, kind = rd.ov.countType(p.Type), 2
				}
				n *= rd.fanOut(pats, used, i, b)
				acc = accByVar
			}
			if best < 0 || acc < bestAcc || (acc == bestAcc && (n < bestN || n == bestN && kind < bestKind)) {
				best, bestAcc, bestN, bestKind = i, acc, n, kind
			}
		}
		p := pats[best]
		used[best] = true
		cont := true
		rd.scan(p, b, func(f facts.Fact, own bool) bool {
			mark, rmark := b.len(), len(*reads)
			if rd.bindFact(p, f, b) {
				*reads = append(*reads, readOf(f, own))
				cont = step(left - 1)
			}
			b.truncate(mark)
			*reads = (*reads)[:rmark]
			return cont
		})
		used[best] = false
		return cont
	}
	return step(len(pats))
}

// fanOut estimates how many facts the join's next step visits for each
// fact of pats[i], a scan by type or by the values a condition allows,
// under b: one when a pattern left becomes a lookup of one key once
// pats[i]'s variables are bound, else the average a pattern left looked
// up by an index visits for each fact of pats[i]'s type (its facts over
// those: the few unreachable nodes lead to their own placements, not to
// all of them), at least one.
//
// Every instance of a thousand services is 100 times as many facts to
// visit as the services, and a scheduler evaluated whole started from
// the services because there were fewer of them than of pending
// instances: at 100,000 instances it visited every instance in every
// round that placed some (a fan-out the greedy order did not see).
func (rd *round) fanOut(pats []*rules.Pattern, used []bool, i int, b *binding) int {
	p := pats[i]
	binds := func(v string) bool {
		if b.has(v) || v == p.Alias {
			return true
		}
		for _, sg := range p.Segs {
			if sg.Var == v {
				return true
			}
		}
		return false
	}
	best, per := 0, max(rd.ov.countType(p.Type), 1)
	for j, q := range pats {
		if used[j] || j == i {
			continue
		}
		all, some := true, false
		for _, sg := range q.Segs {
			if sg.Var == "" {
				continue
			}
			if binds(sg.Var) {
				some = true
			} else {
				all = false
			}
		}
		if all {
			return 1 // a Get
		}
		if !some && (q.Alias == "" || !binds(q.Alias)) {
			continue // a scan of its own: not this step's fan-out
		}
		avg := (rd.ov.countType(q.Type) + per - 1) / per
		if best == 0 || avg < best {
			best = avg
		}
	}
	return max(best, 1)
}

func readOf(f facts.Fact, own bool) Read {
	if own {
		return Read{Key: f.Key, Own: true}
	}
	return Read{Key: f.Key, Rev: f.ModRevision}
}
