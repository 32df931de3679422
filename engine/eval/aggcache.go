package eval

import (
	"cmp"
	"math/big"
	"slices"
	"sort"
	"strings"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// The aggregate cache. Within a round the reader is a fixed snapshot and
// only the round's own writes change what an aggregate sees, so a group's
// result can be kept until a write could change it. A write invalidates the
// groups its fact belongs to before and after the write, found by joining
// the written fact with the rest of the aggregate's patterns (as
// Incremental finds the bindings a change affects). Without this, placing
// I instances on N nodes recomputes every node's usage for every instance:
// quadratic in I.

// aggInfo is what the cache needs to know of an aggregate.
type aggInfo struct {
	group []string // variables of the surrounding scopes the result depends on, sorted
	timed bool     // its where or of reads now: never kept across rounds
	// adjustable holds the patterns through which a changed fact adjusts a
	// cached result instead of dropping it: the only pattern of its fact
	// type, and for an absent pattern one whose variables the members bind
	// (an existential absence is not one member's).
	adjustable map[*rules.Pattern]bool
	// named holds the positions in group of the variables a member binds
	// itself (the service an instance belongs to); when it is not all of
	// them, a changed member joins the cached groups that agree on these
	// (aggStore.partial).
	named []int
	whole bool // a round may compute every group at once (whole.go)
	seq   int  // the order it was met in the rule set: for deterministic walks
}

// partialKey renders the values of the group variables members name.
func partialKey(info *aggInfo, get func(i int) string) string {
	var k strings.Builder
	for _, i := range info.named {
		k.WriteString(get(i))
		k.WriteByte(0)
	}
	return k.String()
}

type aggEntry struct {
	val   ref.Val
	reads []Read
	deps  *deps      // what computing it read (aggstore.go); nil once adjusted by the round's writes, and in a kept whole aggregate
	exact *big.Rat   // a sum of doubles, exact (computeAggregate); never changed in place
	outer []outerVal // the group's values, in aggInfo.group order
	own   bool       // adjusted by the round's own writes (or created by them)
}

// outerVal is a group variable's value; unbound variables (a comprehension
// variable taken for an outer one) are not bound by withOuter.
type outerVal struct {
	v     val
	bound bool
}

// outerOf returns the values of the group variables under b.
func outerOf(info *aggInfo, b *binding) []outerVal {
	out := make([]outerVal, len(info.group))
	for i, name := range info.group {
		out[i].v, out[i].bound = b.get(name)
	}
	return out
}

// withOuter returns a copy of member binding b with the group's values it
// lacks, or false when it disagrees with one it has.
func withOuter(info *aggInfo, b *binding, outer []outerVal) (*binding, bool) {
	var out *binding
	for i, name := range info.group {
		o := outer[i]
		if v, ok := b.get(name); ok {
			if !o.bound || v.str != o.v.str {
				return nil, false
			}
			continue
		}
		if !o.bound {
			continue
		}
		if out == nil {
			out = b.clone()
		}
		out.push(name, o.v)
	}
	if out == nil {
		out = b.clone()
	}
	return out, true
}

// aggSite is an aggregate pattern a written fact may match.
type aggSite struct {
	ag *rules.Aggregate
	p  *rules.Pattern
}

// buildAggs records each aggregate's group variables: the outer variables
// its patterns join on and those its where and of expressions read.
func (e *Evaluator) buildAggs(rs *rules.RuleSet) {
	e.aggs = map[*rules.Aggregate]*aggInfo{}
	e.aggSites = map[*facts.FactType][]aggSite{}
	e.headAggs = map[*rules.Choice][]bool{}
	add := func(ag *rules.Aggregate) {
		if e.aggs[ag] != nil {
			return // a shared aggregate, met again in another rule: one cache for all
		}
		own := map[string]bool{}
		for _, v := range ag.Body.Binds {
			own[v] = true
		}
		group := map[string]bool{}
		timed := false
		for _, v := range ag.Body.Outer {
			group[v] = true
		}
		for _, x := range []*rules.Expr{ag.Where, ag.Of} {
			if x == nil || x.AST == nil {
				continue
			}
			for id := range idents(x.AST.NativeRep().Expr()) {
				if !own[id] && id != rules.NowVar {
					group[id] = true // may be a comprehension variable: a harmless extra
				}
				if id == rules.NowVar {
					timed = true
				}
			}
		}
		info := &aggInfo{timed: timed, adjustable: map[*rules.Pattern]bool{}, seq: len(e.aggs)}
		all := map[*facts.FactType]int{}
		bound := map[string]bool{}
		for _, p := range ag.Body.Match {
			for _, sg := range p.Segs {
				bound[sg.Var] = true
			}
			bound[p.Alias] = true
		}
		for v := range group {
			info.group = append(info.group, v)
		}
		sort.Strings(info.group)
		for i, v := range info.group {
			if bound[v] {
				info.named = append(info.named, i) // a member binds it itself
			}
			bound[v] = true
		}
		for _, ps := range [][]*rules.Pattern{ag.Body.Match, ag.Body.Optional, ag.Body.Absent} {
			for _, p := range ps {
				all[p.Type]++
			}
		}
		for _, ps := range [][]*rules.Pattern{ag.Body.Match, ag.Body.Optional, ag.Body.Absent} {
			for _, p := range ps {
				ok := all[p.Type] == 1
				if p.Negated {
					for _, sg := range p.Segs {
						if sg.Var != "" && !bound[sg.Var] {
							ok = false
						}
					}
				}
				info.adjustable[p] = ok
			}
		}
		info.whole = wholeEligible(ag, info)
		e.aggs[ag] = info
		for _, p := range append(append(append([]*rules.Pattern{}, ag.Body.Match...), ag.Body.Optional...), ag.Body.Absent...) {
			e.aggSites[p.Type] = append(e.aggSites[p.Type], aggSite{ag: ag, p: p})
		}
	}
	for _, r := range rs.Rules {
		for _, ag := range r.Body.Aggregates {
			add(ag)
		}
		if r.Choose != nil {
			for _, ag := range r.Choose.Body.Aggregates {
				add(ag)
			}
			e.headAggs[r.Choose] = headAggregates(r)
		}
	}
}

// headAggregates reports, for each aggregate of r's choice, whether r's
// heads read it: those of the chosen candidate are computed even when no
// filter or score read them (choose).
func headAggregates(r *rules.Rule) []bool {
	used := map[string]bool{}
	for _, h := range r.Heads {
		for _, v := range h.Vars() {
			used[v] = true
		}
		if h.Value != nil && h.Value.AST != nil {
			for id := range idents(h.Value.AST.NativeRep().Expr()) {
				used[id] = true
			}
		}
	}
	out := make([]bool, len(r.Choose.Body.Aggregates))
	for i, ag := range r.Choose.Body.Aggregates {
		out[i] = used[ag.Name]
	}
	return out
}

// idents returns the identifiers an expression reads.
func idents(x ast.Expr) map[string]bool { return rules.Idents(x) }

// groupKey renders the values of an aggregate's group variables under b.
func groupKey(info *aggInfo, b *binding) string {
	return string(appendGroupKey(nil, info, b))
}

// appendGroupKey appends groupKey(info, b) to dst: a lookup from a buffer
// allocates nothing.
func appendGroupKey(dst []byte, info *aggInfo, b *binding) []byte {
	for _, v := range info.group {
		x, _ := b.get(v)
		dst = append(dst, x.str...)
		dst = append(dst, 0)
	}
	return dst
}

// maintain keeps the cached groups right across a write: it is called
// with the old value before the write (sign -1) and the new one after it
// (sign +1). The members the fact adds or removes are found by joining it
// with the rest of the aggregate's patterns; count and sum are adjusted,
// min and max take an added member; anything else (a removed min or max, a
// fact of an optional or absent pattern, a group the fact does not name)
// drops the cached result, to be recomputed when next needed.
func (rd *round) maintain(key string, value []byte, sign int) {
	if rd.e.noAggCache || (len(rd.aggCache) == 0 && len(rd.whole) == 0) {
		return
	}
	k, err := rd.e.rs.Schema.Parse(key)
	if err != nil {
		return
	}
	parts := strings.Split(key, "/")
	kb := scratch(&rd.maintainB)
	for _, s := range rd.e.aggSites[k.Type] {
		if rd.only == nil || rd.only[s.ag] {
			rd.maintainSite(s, key, parts, kb, value, sign)
		}
	}
}

// maintainSite is maintain for one aggregate pattern the fact may match.
func (rd *round) maintainSite(s aggSite, key string, parts []string, kb *binding, value []byte, sign int) {
	entries := rd.aggCache[s.ag]
	whole := rd.isWhole(s.ag)
	if len(entries) == 0 && !whole {
		return
	}
	// Adjusting across rounds records what it reads for the results
	// it adjusts (aggstore.go).
	var sd *deps
	if rd.touched != nil {
		// The changed fact itself is among what the result now depends
		// on: a later change of it that the store cannot adjust for
		// must find the result to drop it.
		sd = &deps{gets: []string{key}}
		rd.ov.rec = sd
		defer func() { rd.ov.rec = nil }()
	}
	if value == nil && !s.p.Optional && !s.p.Negated {
		// An absent fact is in no group of a match pattern (a created
		// fact's "before", a deleted one's "after").
		return
	}
	if !matchParts(s.p, parts, kb) {
		return
	}
	info := rd.e.aggs[s.ag]
	adjust := info.adjustable[s.p]
	// An optional fact's value is bound by contribute, as the member sees it.
	if s.p.Alias != "" && value != nil && !s.p.Optional {
		if dv, err := decode(s.p.Type.Value, value); err == nil {
			kb.push(s.p.Alias, goVal(dv))
		}
	}
	var rest []*rules.Pattern
	for _, p := range s.ag.Body.Match {
		if p != s.p {
			rest = append(rest, p)
		}
	}
	all := false
	type member struct {
		gk    string
		b     *binding
		reads []Read
		key   string // b.key(), for the sort
	}
	var members []member
	var reads []Read
	rd.join(rest, kb, &reads, func() bool {
		complete := true
		for _, v := range info.group {
			if !kb.has(v) {
				complete = false
			}
		}
		if complete {
			gk := groupKey(info, kb)
			if _, held := entries[gk]; !held && !whole {
				return true // nothing to adjust: a placement exposing 8080 is in the group of every service exposing it
			}
			members = append(members, member{gk, rd.borrow(kb), append([]Read(nil), reads...), ""}) // contribute binds the optionals on it
			return true
		}
		// The fact does not name its group (the rule's outer values
		// its where reads): it is a member of every cached group that
		// agrees with what it does name.
		for _, i := range info.named {
			if !kb.has(info.group[i]) {
				all = true // drop them all
				return false
			}
		}
		pk := partialKey(info, func(i int) string { return kb.str(info.group[i]) })
		for _, gk := range rd.e.store.partial[s.ag][pk] {
			e, ok := entries[gk]
			if !ok {
				continue
			}
			if b, ok := withOuter(info, kb, e.outer); ok {
				members = append(members, member{gk, b, append([]Read(nil), reads...), ""})
			}
		}
		return true
	})
	if all {
		delete(rd.aggCache, s.ag)
		rd.notWhole(s.ag)
		return
	}
	// The join visits in index order; the cached reads end up in plans.
	if len(members) > 1 {
		for i := range members {
			members[i].key = members[i].b.key()
		}
		slices.SortFunc(members, func(a, b member) int { return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.gk, b.gk)) })
	}
	// A fact of a match pattern is not among the member's reads the join
	// and contribute list; one of an optional or absent one is.
	self := !s.p.Optional && !s.p.Negated
	for _, m := range members {
		e, held := entries[m.gk]
		if !held && !whole {
			continue // nothing to adjust
		}
		if held && rd.touched == nil && !e.own && (e.deps != nil && !e.deps.tooMany && !e.deps.impure || e.deps == nil && rd.keptWhole(s.ag)) {
			rd.pristine = append(rd.pristine, pristine{s.ag, m.gk, e}) // as the reader has it
		}
		if !held {
			e = rd.emptyGroup(s.ag, info, m.b) // whole: a group not held has no member
		}
		if !adjust {
			delete(entries, m.gk)
			rd.notWhole(s.ag)
			continue
		}
		mreads := m.reads
		var member, ok bool
		if e, member, ok = rd.contribute(s.ag, e, m.b, &mreads, sign); !ok {
			delete(entries, m.gk)
			rd.notWhole(s.ag)
			continue
		}
		if !held && (!member || sign < 0) {
			if member { // a member leaving a group not held: it was not whole
				rd.notWhole(s.ag)
			}
			continue
		}
		if sign < 0 && member {
			// The member's facts leave the listed reads, as a
			// recomputation would not list them.
			if self {
				e.reads = withoutReads(e.reads, key)
			}
			e.reads = withoutReads(e.reads, readKeys(mreads)...)
		}
		if sign > 0 && member && len(e.reads) < rd.e.maxAggReads {
			e.reads = append([]Read(nil), e.reads...)
			if self {
				e.reads = append(e.reads, rd.writtenRead(key))
			}
			for _, r := range mreads { // the member's other facts, as a recomputation would list them
				if !r.Prefix {
					r.NoGuard = true
					e.reads = append(e.reads, r)
				}
			}
		}
		if rd.touched == nil {
			e.deps = nil // no longer what its computation read: not kept across rounds
			e.own = true
			rd.adjusted = append(rd.adjusted, aggRef{ag: s.ag, gk: m.gk})
		} else {
			*rd.touched = append(*rd.touched, aggRef{ag: s.ag, gk: m.gk, d: sd})
		}
		entries[m.gk] = e
	}
	for _, m := range members { // contribute evaluated on them and kept none
		rd.giveBack(m.b)
	}
}

// contribute adds (sign +1) or removes (sign -1) the member m to or from a
// cached group result; member is false when m is not one (nothing changes);
// ok false means the result must be recomputed.
func (rd *round) contribute(ag *rules.Aggregate, e aggEntry, m *binding, reads *[]Read, sign int) (_ aggEntry, member, ok bool) {
	if !rd.optionalAndAbsent(ag.Body, m, reads) {
		return e, false, true // not a member
	}
	if ag.Where != nil {
		in, err := rd.evalBool(ag.Where, m, what{"aggregate", ag.Name, " where"})
		if err != nil {
			return e, false, false
		}
		if !in {
			return e, false, true // not a member
		}
	}
	if ag.Func == "count" {
		n, ok := e.val.(types.Int)
		e.val = n + types.Int(sign)
		return e, true, ok
	}
	v, err := rd.eval(ag.Of, m, what{"aggregate", ag.Name, ""})
	if err != nil {
		return e, true, false
	}
	switch ag.Func {
	case "sum":
		if d, isDouble := v.(types.Double); isDouble && e.exact != nil {
			x := new(big.Rat).Set(e.exact)
			if !addExact(x, float64(d), sign) {
				return e, true, false
			}
			f, _ := x.Float64()
			e.exact, e.val = x, types.Double(f)
			return e, true, true
		}
		if sign > 0 {
			a, ok := e.val.(traits.Adder)
			if !ok {
				return e, true, false
			}
			e.val = a.Add(v)
		} else {
			sub, ok := e.val.(traits.Subtractor)
			if !ok {
				return e, true, false
			}
			e.val = sub.Subtract(v)
		}
		return e, true, !types.IsError(e.val)
	default: // min, max
		if sign < 0 {
			return e, true, false
		}
		cur, ok := e.val.(*types.Optional)
		if !ok {
			return e, true, false
		}
		if !cur.HasValue() {
			e.val = types.OptionalOf(v)
			return e, true, true
		}
		c, ok := v.(traits.Comparer)
		if !ok {
			return e, true, false
		}
		cmp, ok := c.Compare(cur.GetValue()).(types.Int)
		if !ok {
			return e, true, false
		}
		if (ag.Func == "min" && cmp < 0) || (ag.Func == "max" && cmp > 0) {
			e.val = types.OptionalOf(v)
		}
		return e, true, true
	}
}

// readsNow reports whether time passing can change what the rule does:
// whether an expression of its conditions, choice or derived values reads now.
func readsNow(r *rules.Rule) bool {
	exprs := decisionExprs(r)
	for _, h := range r.Heads {
		// An emitted value that reads now stamps the time the action
		// fires; time passing does not make it fire. A derived value that
		// reads now is a view of the time and follows it.
		if h.Kind == rules.Derive {
			exprs = append(exprs, h.Value)
		}
	}
	for _, x := range exprs {
		if x != nil && x.AST != nil && idents(x.AST.NativeRep().Expr())[rules.NowVar] {
			return true
		}
	}
	return false
}

// decisionExprs lists the expressions that decide whether and how r fires
// (conditions, lets, aggregates, its choice, its fresh count), not the
// values its heads write; an absent one is nil.
func decisionExprs(r *rules.Rule) []*rules.Expr {
	var exprs []*rules.Expr
	scope := func(sc *rules.Scope) {
		for _, ag := range sc.Aggregates {
			exprs = append(exprs, ag.Where, ag.Of)
		}
		for _, l := range sc.Lets {
			exprs = append(exprs, l.Expr)
		}
	}
	scope(r.Body)
	exprs = append(exprs, r.When)
	if ch := r.Choose; ch != nil {
		scope(ch.Body)
		exprs = append(exprs, ch.Score, ch.Pick)
		for _, k := range ch.Order {
			exprs = append(exprs, k.Expr)
		}
		for _, f := range ch.Filters {
			exprs = append(exprs, f.Expr)
		}
	}
	if r.Fresh != nil {
		exprs = append(exprs, r.Fresh.Count)
	}
	return exprs
}

// withoutReads returns reads without one listing of each key, as a
// recomputation without a member would list them.
func withoutReads(reads []Read, keys ...string) []Read {
	out := append([]Read(nil), reads...)
	for _, k := range keys {
		for i, r := range out {
			if r.Key == k {
				out = append(out[:i], out[i+1:]...)
				break
			}
		}
	}
	return out
}

// readKeys returns the keys of the reads a recomputation lists (not prefixes).
func readKeys(reads []Read) []string {
	var out []string
	for _, r := range reads {
		if !r.Prefix {
			out = append(out, r.Key)
		}
	}
	return out
}

// writtenRead is how a cached result lists a fact that joined it through
// maintain: a write of the round (own), or in the store's overlay the
// committed fact with its revision.
func (rd *round) writtenRead(key string) Read {
	if e, ok := rd.ov.w[key]; ok && rd.ov.committed {
		return Read{Key: key, Rev: e.f.ModRevision, NoGuard: true}
	}
	return Read{Key: key, Own: true, NoGuard: true}
}
