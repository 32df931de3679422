package eval

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// sol is one binding of a scope with the facts it read.
type sol struct {
	b     *binding
	reads []Read
	key   string // b.key() at the time the scope was solved, for ordering: set when it found more than one (keyed)
}

// keyed sets s.key when solve left it unset, for callers that order the
// solutions of several solves together.
func (s *sol) keyed() {
	if s.key == "" {
		s.key = s.b.key()
	}
}

// solve enumerates the bindings of a scope's match, optional and absent
// patterns extending b, in canonical order.
func (rd *round) solve(sc *rules.Scope, b *binding, reads []Read) []*sol {
	var out []*sol
	bb := rd.borrow(b)
	defer rd.giveBack(bb)
	rs := rd.borrowReads(reads)
	defer func() { rd.giveReads(rs) }()
	rd.join(sc.Match, bb, &rs, func() bool {
		mark, rmark := bb.len(), len(rs)
		if rd.optionalAndAbsent(sc, bb, &rs) {
			// Completing the solution pushes its aggregates and lets (and a
			// fresh id); an aggregate's members push nothing.
			out = append(out, &sol{b: rd.borrow(bb), reads: append([]Read(nil), rs...)})
		}
		bb.truncate(mark)
		rs = rs[:rmark]
		return true
	})
	rd.e.stats.Bindings += int64(len(out))
	// Most scopes solve to one binding (an instance's facts): its key,
	// built for the sort alone, was a string allocated per solution.
	if len(out) > 1 {
		for _, s := range out {
			s.keyed()
		}
		sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	}
	return out
}

// optionalAndAbsent binds the optional aliases (an empty optional when the
// fact is absent) and checks the absent patterns.
func (rd *round) optionalAndAbsent(sc *rules.Scope, b *binding, reads *[]Read) bool {
	for _, p := range sc.Optional {
		key, f, ok, own := rd.ov.getPattern(p, b)
		if ok && f.Invalid == "" {
			if v, err := rd.e.values.optionalFact(p.Type, f); err == nil {
				b.push(p.Alias, v)
				*reads = append(*reads, readOf(f, own))
				continue
			}
		}
		b.push(p.Alias, val{cel: types.OptionalNone, str: ""})
		if ok {
			// Absent because invalid: guarded by the invalid fact's
			// revision, not by its absence, which no commit could meet.
			rd.e.stats.BadValues++
			*reads = append(*reads, readOf(f, own))
			continue
		}
		*reads = append(*reads, Read{Key: key, Own: own})
	}
	for _, p := range sc.Absent {
		if !rd.absent(p, b, reads) {
			return false
		}
	}
	return true
}

// absent reports whether no fact matches p under b; unbound variables are
// existential ("no endpoint of this service at all").
func (rd *round) absent(p *rules.Pattern, b *binding, reads *[]Read) bool {
	acc, _, _ := rd.e.plan(p, b)
	if acc == accGet {
		key, f, ok, own := rd.ov.getPattern(p, b)
		switch {
		case !ok:
			*reads = append(*reads, Read{Key: key, Own: own})
		case f.Invalid != "":
			rd.e.stats.BadValues++
			*reads = append(*reads, readOf(f, own)) // absent while it stays invalid
			return true
		}
		return !ok
	}
	found, invalid := false, false
	probe := b.clone()
	rd.scan(p, probe, func(f facts.Fact, own bool) bool {
		mark := probe.len()
		found = rd.bindFact(p, f, probe)
		invalid = invalid || f.Invalid != ""
		probe.truncate(mark)
		return !found
	})
	if found {
		return false
	}
	if invalid {
		// An invalid fact under the prefix would fail the ranged
		// compare below on every commit; the next change catches what
		// the missing guard lets through.
		return true
	}
	// Guard "still nothing" with a ranged compare when the unbound
	// variables are all trailing; otherwise the next round catches it.
	lead := 0
	for lead < len(p.Segs) {
		if _, ok := known(p, lead, b); !ok {
			break
		}
		lead++
	}
	trailing := true
	for i := lead; i < len(p.Segs); i++ {
		if _, ok := known(p, i, b); ok {
			trailing = false
		}
	}
	if trailing {
		parts := make([]string, lead)
		for i := range parts {
			parts[i], _ = known(p, i, b)
		}
		*reads = append(*reads, Read{Key: strings.Join(parts, "/") + "/", Prefix: true})
	}
	return true
}

// complete computes a scope's aggregates and lets onto s.
func (rd *round) complete(sc *rules.Scope, s *sol) error {
	return rd.completeDeferring(sc, s, nil)
}

// completeDeferring is complete, except that with deferred set the member
// reads of each aggregate are appended to *deferred instead of s.reads. A
// choice completes every candidate but keeps one: copying up to
// MaxAggregateReads reads per aggregate for each of the others was a third
// of what scheduling allocated.
func (rd *round) completeDeferring(sc *rules.Scope, s *sol, deferred *[][]Read) error {
	for _, ag := range sc.Aggregates {
		v, rs, err := rd.aggs.lookup(ag, s)
		if err != nil {
			return err
		}
		if deferred != nil {
			*deferred = append(*deferred, rs)
		} else {
			s.reads = append(s.reads, rs...)
		}
		s.b.push(ag.Name, celVal(v))
	}
	for _, l := range sc.Lets {
		v, err := rd.eval(l.Expr, s.b, what{"let", l.Name, ""})
		if err != nil {
			return err
		}
		s.b.push(l.Name, celVal(v))
	}
	return nil
}

// release hands the bindings of solutions nothing refers to any more back
// to the round's spares (fold keeps none of its members').
func (rd *round) release(sols []*sol) {
	for _, m := range sols {
		rd.giveBack(m.b)
		m.b = nil
	}
}

// fold computes an aggregate over its members, in order, and appends the
// member reads it lists to reads.
func (rd *round) fold(ag *rules.Aggregate, members []*sol, reads []Read) (_ ref.Val, exact *big.Rat, _ []Read, _ error) {
	var acc ref.Val
	listed := 0
	n := int64(0)
	for _, m := range members {
		if ag.Where != nil {
			ok, err := rd.evalBool(ag.Where, m.b, what{"aggregate", ag.Name, " where"})
			if err != nil {
				return nil, nil, reads, err
			}
			if !ok {
				continue
			}
		}
		for _, r := range m.reads {
			if !r.Prefix && listed < rd.e.maxAggReads {
				r.NoGuard = true
				reads = append(reads, r)
				listed++
			}
		}
		n++
		if ag.Func == "count" {
			continue
		}
		v, err := rd.eval(ag.Of, m.b, what{"aggregate", ag.Name, ""})
		if err != nil {
			return nil, nil, reads, err
		}
		if d, ok := v.(types.Double); ok && ag.Func == "sum" {
			if exact == nil {
				exact = new(big.Rat)
			}
			if !addExact(exact, float64(d), 1) {
				return nil, nil, reads, fmt.Errorf("aggregate %s: cannot add %v", ag.Name, float64(d))
			}
			acc = types.Double(0)
			continue
		}
		switch {
		case acc == nil:
			acc = v
		case ag.Func == "sum":
			a, ok := acc.(traits.Adder)
			if !ok {
				return nil, nil, reads, fmt.Errorf("aggregate %s: cannot add %s values", ag.Name, acc.Type())
			}
			if acc = a.Add(v); types.IsError(acc) {
				return nil, nil, reads, fmt.Errorf("aggregate %s: %v", ag.Name, acc.Value())
			}
		default:
			c, ok := v.(traits.Comparer)
			if !ok {
				return nil, nil, reads, fmt.Errorf("aggregate %s: cannot compare %s values", ag.Name, v.Type())
			}
			cmp, ok := c.Compare(acc).(types.Int)
			if !ok {
				return nil, nil, reads, fmt.Errorf("aggregate %s: cannot compare %s with %s", ag.Name, v.Type(), acc.Type())
			}
			if (ag.Func == "min" && cmp < 0) || (ag.Func == "max" && cmp > 0) {
				acc = v
			}
		}
	}
	switch ag.Func {
	case "count":
		return types.Int(n), nil, reads, nil
	case "sum":
		if exact != nil {
			f, _ := exact.Float64()
			return types.Double(f), exact, reads, nil
		}
		if acc == nil {
			if ag.Type.Kind() == types.DoubleKind {
				return types.Double(0), new(big.Rat), reads, nil
			}
			return types.Int(0), nil, reads, nil
		}
		return acc, nil, reads, nil
	}
	if acc == nil {
		return types.OptionalNone, nil, reads, nil
	}
	return types.OptionalOf(acc), nil, reads, nil
}

// errBudget marks a CEL evaluation stopped by its cost limit.
var errBudget = errors.New("over its CEL cost budget")

// what names an evaluated expression in an error ("filter cpu", "aggregate
// used where"); formatted only for an error, as most evaluations have none.
type what struct{ kind, name, suffix string }

func (w what) String() string {
	if w.name == "" {
		return w.kind + w.suffix
	}
	return w.kind + " " + w.name + w.suffix
}

func (rd *round) eval(e *rules.Expr, b *binding, what what) (ref.Val, error) {
	// One activation for the round: an evaluation calls no other (a
	// choice's, which may compute aggregates, has its own).
	return rd.evalIn(&rd.activation, e, b, what)
}

// evalIn is eval through the activation a.
func (rd *round) evalIn(a *activation, e *rules.Expr, b *binding, what what) (ref.Val, error) {
	rd.e.stats.Evals++
	prog := e.Program
	if e.Fast != nil && b.within(rules.FastSize) {
		prog = e.Fast
	}
	a.b, a.now = b, rd.now
	out, det, err := prog.Eval(a)
	a.b = nil
	if a.lazy != nil && a.lazy.err != nil {
		err, a.lazy.err = a.lazy.err, nil
		return nil, fmt.Errorf("%s %q: %w", what, e.Src, err)
	}
	if det != nil {
		if c := det.ActualCost(); c != nil {
			rd.cost += *c
			rd.e.stats.Cost += *c
		}
	}
	if err != nil {
		if strings.Contains(err.Error(), "cost limit exceeded") {
			return nil, fmt.Errorf("%s %q: %w (limit %d): %v", what, e.Src, errBudget, rd.e.rs.CostLimit, err)
		}
		return nil, fmt.Errorf("%s %q: %w", what, e.Src, err)
	}
	if types.IsError(out) {
		return nil, fmt.Errorf("%s %q: %v", what, e.Src, out.Value())
	}
	return out, nil
}

func (rd *round) evalBool(e *rules.Expr, b *binding, what what) (bool, error) {
	return rd.evalBoolIn(&rd.activation, e, b, what)
}

func (rd *round) evalBoolIn(a *activation, e *rules.Expr, b *binding, what what) (bool, error) {
	v, err := rd.evalIn(a, e, b, what)
	if err != nil {
		return false, err
	}
	bv, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%s %q: got %s, expected a bool", what, e.Src, v.Type())
	}
	return bool(bv), nil
}

// lazyAggregates computes a choice candidate's aggregates as CEL reads
// them (choose), and with lets set a rule body's lets too (whenLazily).
type lazyAggregates struct {
	rd    *round
	sc    *rules.Scope
	s     *sol       // the candidate
	reads [][]Read   // by aggregate: the member reads of those computed, nil for the others
	err   error      // the first computation that failed, reported by evalIn
	known []knownAgg // the aggregates serve looked up for the candidate
	lets  bool
	// tracing: each aggregate computed, and each variable of the outer
	// binding (its first outer names) read, is added to trace with its
	// value, for the candidate's kept outcome (candmemo.go).
	// The aggregates traced are stamped when the trace is kept
	// (keptTrace): serving an outcome traces each aggregate it looks up,
	// and most serve, their trace unused.
	tracing bool
	outer   int
	trace   []memoRead
}

// unstamped marks a traced aggregate's stamp as not taken yet.
const unstamped = -2

// keptTrace is a copy of the trace for the candidate's kept outcome, its
// aggregates stamped as they were when looked up: evaluating a candidate
// changes nothing the round holds.
func (l *lazyAggregates) keptTrace() []memoRead {
	for i, r := range l.trace {
		if r.agg >= 0 && r.st.seq == unstamped {
			l.trace[i].st = l.rd.aggs.stampOf(l.sc.Aggregates[r.agg], l.s.b, l.outer)
		}
	}
	return slices.Clone(l.trace)
}

// traceOuter adds outer variable name's value to the trace, once.
func (l *lazyAggregates) traceOuter(name string, v val) {
	for _, r := range l.trace {
		if r.agg < 0 && r.name == name {
			return
		}
	}
	l.trace = append(l.trace, memoRead{agg: -1, name: name, v: v, st: groupStamp{seq: -1}})
}

// begin starts on candidate s.
func (l *lazyAggregates) begin(s *sol) {
	l.s, l.err = s, nil
	clear(l.reads)
}

// compute looks up the candidate's i-th aggregate, keeps its member
// reads, pushes it onto the candidate's binding and, tracing, adds it to
// the trace.
func (l *lazyAggregates) compute(i int) (val, error) {
	cv, rs, err := l.rd.aggregate(l.sc.Aggregates[i], l.s)
	if err != nil {
		return val{}, err
	}
	l.take(i, cv, rs)
	return cv, nil
}

// take keeps the candidate's i-th aggregate, cv with member reads rs, as
// compute does once it has looked it up.
func (l *lazyAggregates) take(i int, cv val, rs []Read) {
	l.reads[i] = rs
	if l.tracing {
		l.trace = append(l.trace, memoRead{agg: i, v: cv, st: groupStamp{seq: unstamped}})
	}
	l.s.b.push(l.sc.Aggregates[i].Name, cv)
}

// aggregate is the value of ag under s, as a choice's filters and order
// read it, and the member reads it lists (not nil: computed).
func (rd *round) aggregate(ag *rules.Aggregate, s *sol) (val, []Read, error) {
	v, rs, err := rd.aggs.lookup(ag, s)
	if err != nil {
		return val{}, nil, err
	}
	if rs == nil {
		rs = []Read{}
	}
	return rd.e.numbers.number(v), rs, nil
}

// knownAgg is an aggregate looked up for the candidate being served.
type knownAgg struct {
	i  int
	v  val
	rs []Read
}

// computeKnown is compute, taking the value from l.known when serve
// looked it up for this candidate already (under another kept outcome).
func (l *lazyAggregates) computeKnown(i int) (val, error) {
	for _, k := range l.known {
		if k.i == i {
			l.take(i, k.v, k.rs)
			return k.v, nil
		}
	}
	cv, err := l.compute(i)
	if err == nil {
		l.known = append(l.known, knownAgg{i: i, v: cv, rs: l.reads[i]})
	}
	return cv, err
}

// knownDiffers reports whether an aggregate among reads was looked up for
// the candidate with another value than read: an outcome that read it
// cannot be served.
func (l *lazyAggregates) knownDiffers(reads []memoRead) bool {
	for _, r := range reads {
		if r.agg < 0 {
			continue
		}
		for _, k := range l.known {
			if k.i == r.agg && !sameVal(k.v.cel, r.v.cel) {
				return true
			}
		}
	}
	return false
}

// resolve computes the aggregate called name, once per candidate, and
// pushes it onto the candidate's binding.
func (l *lazyAggregates) resolve(name string) (any, bool) {
	for i, ag := range l.sc.Aggregates {
		if ag.Name != name {
			continue
		}
		cv, err := l.compute(i)
		if err != nil {
			if l.err == nil {
				l.err = err
			}
			return types.WrapErr(err), true
		}
		return cv.celOf(), true
	}
	if !l.lets {
		return nil, false
	}
	for _, lt := range l.sc.Lets {
		if lt.Name != name {
			continue
		}
		// Its own activation: the one reading it is mid-evaluation.
		v, err := l.rd.evalIn(&activation{lazy: l}, lt.Expr, l.s.b, what{"let", lt.Name, ""})
		if err != nil {
			if l.err == nil {
				l.err = err
			}
			return types.WrapErr(err), true
		}
		cv := celVal(v)
		l.s.b.push(lt.Name, cv)
		return cv.celOf(), true
	}
	return nil, false
}

// A rule's condition often decides on one count before the others
// matter: `old > 0 && ...` in replace_first, false while nothing is to be
// replaced. Computing every aggregate and let of the body first recounted
// counts no decision read (a service of thousands of instances, every
// round it changes in). whenLazily evaluates the condition computing the
// aggregates and lets it reads as it reads them; only when it holds is the
// body completed as before, every aggregate in order, for the guard, the
// choice, the heads and the firing's reads.

// lazyWhen reports whether r's condition is evaluated lazily: a rule
// whose body computes aggregates or lets, and whose bindings get no
// deadline (the deadline's probes read the completed body). A view too:
// a binding whose condition is false derives nothing either way, and one
// that fails to evaluate is evaluated again completed, to be skipped as
// before (its keys kept).
func lazyWhen(r *rules.Rule, deadline bool) bool {
	return r.When != nil && !deadline && (len(r.Body.Aggregates) > 0 || len(r.Body.Lets) > 0)
}

// whenLazily evaluates r's condition under s, computing the body's
// aggregates and lets as it reads them. s is left as it was.
func (rd *round) whenLazily(r *rules.Rule, s *sol) (bool, error) {
	mark, nreads := s.b.len(), len(s.reads)
	defer func() {
		s.b.truncate(mark)
		s.reads = s.reads[:nreads]
	}()
	// Not reentered: what it computes evaluates aggregates and lets, not
	// rules; so one per round serves every binding.
	lz := &rd.lazyBody
	*lz = lazyAggregates{rd: rd, sc: r.Body, s: s, reads: slices.Grow(lz.reads[:0], len(r.Body.Aggregates))[:len(r.Body.Aggregates)], lets: true}
	clear(lz.reads)
	rd.lazyAct = activation{lazy: lz}
	x := r.When
	if len(r.Body.Lets) > 0 {
		// A let computed during the evaluation may be larger than the
		// bound under which the untracked program cannot exceed the cost
		// limit (rules.Expr.Fast).
		y := *x
		y.Fast = nil
		x = &y
	}
	return rd.evalBoolIn(&rd.lazyAct, x, s.b, what{kind: "when"})
}

// sampleStart is where a bounded choice starts visiting its n candidates: a
// hash of the outer binding b, so that the same binding always sees the same
// sample and different bindings spread over the candidates. The hash is
// FNV-1a of each name and its value (the last bound, as get reads it), by
// name, each followed by a NUL; it allocates nothing (a map of the binding
// was built for it for every instance placed).
func sampleStart(b *binding, n int) int {
	var buf [48]int
	idx := buf[:0]
	for i := len(b.names) - 1; i >= 0; i-- {
		if !slices.ContainsFunc(idx, func(j int) bool { return b.names[j] == b.names[i] }) {
			idx = append(idx, i)
		}
	}
	slices.SortFunc(idx, func(x, y int) int { return strings.Compare(b.names[x], b.names[y]) })
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	write := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		h *= prime // the NUL after it: h ^ 0 is h
	}
	for _, i := range idx {
		write(b.names[i])
		write(b.vals[i].str)
	}
	return int(h % uint64(n))
}

// addExact adds sign times f to r exactly; false for NaN or an infinity.
func addExact(r *big.Rat, f float64, sign int) bool {
	var x big.Rat
	if x.SetFloat64(f) == nil {
		return false
	}
	if sign < 0 {
		x.Neg(&x)
	}
	r.Add(r, &x)
	return true
}
