package eval

import (
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strings"
	"sync"

	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types/ref"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// Aggregates. An aggregate (count, sum, min, max over the members of a
// scope) has one result per group: the values of the variables of the
// surrounding scopes it depends on (aggInfo.group). A result costs a join
// over its members, and the scheduler alone asks for the usage of 64
// candidate nodes for each instance it places, so results are kept, at
// three lifetimes:
//
//   - Within a round (aggadjust.go). The reader is a fixed snapshot and
//     only the round's own writes change what an aggregate sees, so a
//     result is kept until a write could change it, and the round's writes
//     adjust the groups their fact joins or leaves (the member found by
//     joining the written fact with the rest of the aggregate's patterns,
//     as Incremental finds the bindings a change affects) instead of
//     dropping them. Without this, placing I instances on N nodes
//     recomputes every node's usage for every instance: quadratic in I.
//   - Across rounds (aggstore.go), for Continue alone: a result is kept with
//     every access its computation made to the reader and dropped when a
//     change falls in one, or adjusted for a batch of changes that say what
//     they replaced.
//   - Whole (aggwhole.go): an aggregate whose members name every group
//     variable is computed for every group in one scan once enough groups
//     were computed one at a time; a group not found then has no member.
//     Kept whole across rounds, it answers every group, the empty ones too,
//     without computing one.
//
// The rest of the evaluator sees them through a narrow interface: a round
// asks roundAggs.lookup for a group's result and tells roundAggs.changed of
// each of its writes; aggregates.end hands what the round learnt to the
// store, and aggregates.follow brings the store from one round's reader to
// the next with the changes between them (aggregates.reset when it is not
// told them).

// aggregates is what an evaluator knows of its rule set's aggregates and
// the results it keeps of them between rounds.
type aggregates struct {
	e     *Evaluator
	info  map[*rules.Aggregate]*aggInfo
	sites map[*facts.FactType][]*siteGroup // by fact type: the aggregate patterns a written fact may match
	heads map[*rules.Choice][]bool         // by a choice's aggregate: read by its rule's heads
	store *aggStore                        // results kept across rounds
	own   *ownWrites                       // the last round's writes, and the results they adjusted (aggown.go)
	// nested is the aggregates that read aggregates of their own: adjusting
	// them records what it reads (maintainSites), a round's own writes do
	// not (aggown.go).
	nested []*rules.Aggregate
	off    bool // WithoutAggregateCache: every result computed when asked for
	// wholeAfter is WithWholeAggregates: wholeAuto by default.
	wholeAfter int64
}

func newAggregates(e *Evaluator) *aggregates {
	return &aggregates{e: e, store: newAggStore(), wholeAfter: wholeAuto}
}

// roundAggs is one round's view of the aggregates: the results it holds,
// right for its reader and its own writes so far, and what it must tell
// the store at its end.
type roundAggs struct {
	a        *aggregates
	rd       *round
	cache    map[*rules.Aggregate]map[string]aggEntry // group results valid for the rest of the round
	computed []aggRef                                 // results computed this round, for the store
	adjusted []aggRef                                 // results adjusted for the round's writes: not kept
	pristine []pristine                               // those of them right for the reader, as they were before (aggstore.go)
	whole    map[*rules.Aggregate]*wholeState         // aggregates whose every group the round holds (aggwhole.go)
	// While the store adjusts its results for changes (aggregates.advance):
	// touched lists the results changed adjusts, only the aggregates it
	// adjusts (nil: all).
	touched *[]aggRef
	only    map[*rules.Aggregate]bool
	except  map[*rules.Aggregate]bool
	// seen holds, within one of advance's passes, the members already
	// adjusted (aggregate, group, member) and the bindings of optional and
	// absent facts already joined with an aggregate's members: a member
	// several changed facts are part of is adjusted once a pass.
	seen  map[string]struct{}
	seenB []byte       // the key seen is looked up by (scratch)
	gkBuf []byte       // the group key lookup looks up
	adjB  []byte       // the group key maintainSites looks up (scratch)
	factB *binding     // the binding changed matches a written fact into (scratch)
	parts []string     // the written key changed matches, split (scratch)
	keys  []string     // the listed keys a member leaving a group takes out (scratch)
	vers  []*groupVers // the round's group versions, by aggregate (groupvers.go)
}

// begin is a round's view of the results the store holds. A round works
// on the store's groups in place: what its writes adjust, end drops or
// restores.
func (a *aggregates) begin(rd *round) *roundAggs {
	ra := &roundAggs{a: a, rd: rd, cache: a.store.groups}
	if a.off {
		ra.cache = map[*rules.Aggregate]map[string]aggEntry{}
		return ra
	}
	if len(a.store.whole) > 0 {
		ra.whole = make(map[*rules.Aggregate]*wholeState, len(a.store.whole))
		for ag := range a.store.whole {
			ra.whole[ag] = &wholeState{tried: true, whole: true, kept: true}
		}
	}
	return ra
}

// reset empties the store: the next round's reader is not one it was told
// the changes to.
func (a *aggregates) reset(rev int64) { a.store.reset(rev); a.own = nil }

// follow brings the store from the reader of the previous round, at
// revision from, to r, told every change between them: results are
// adjusted for the changes when that is cheap and sound, and dropped where
// a change could alter them otherwise.
func (a *aggregates) follow(from int64, r facts.Reader, changes []facts.Change) {
	e := a.e
	own := a.own
	a.own = nil
	// Whether the results are adjusted for cs, changes or the part of them
	// that is not the last round's writes come back: every change says
	// what it replaced and holds to the schema, those writes included
	// (the aggregates exempt from keeping them are adjusted for them).
	valid := sync.OnceValue(func() bool { return prevKnown(changes) && allValid(e.rs.Schema, r, changes) })
	adjustable := func(cs []facts.Change) bool { return len(cs) <= e.adjustLimit(r) && valid() }
	switch {
	case a.off || from < 0 || from != a.store.rev:
		a.store.reset(r.Rev())
		return
	case own != nil && own.rev == from:
		// The last round's writes come back: its results for them are
		// taken, and advanced for the other changes (aggown.go).
		rest, revs, ok := own.split(changes)
		if !ok {
			e.stats.OwnLost++
		}
		if ok && adjustable(rest) {
			e.stats.OwnKept++
			e.labels.phase("advance")
			if len(own.exempt) > 0 {
				a.advance(r, changes, own.exempt, nil)
			}
			a.keepOwn(own, revs)
			a.advance(r, rest, nil, own.exempt)
			return
		}
	}
	switch {
	case adjustable(changes):
		e.labels.phase("advance")
		a.advance(r, changes, nil, nil)
	default:
		// Too large a batch to adjust every kept result for: they are
		// dropped, but the whole aggregates are adjusted still. Dropped,
		// they were computed a group at a time again, and whole again, in
		// every round of a large apply (agents report in batches of
		// thousands).
		e.labels.phase("advance")
		if len(a.store.whole) > 0 && valid() {
			keep, theirs := a.wholeWorthAdjusting(changes)
			a.advance(r, theirs, keep, nil)
		} else {
			clear(a.store.whole)
		}
		a.store.dropAdjusted()
		for _, c := range changes {
			a.store.forget(e.rs.Schema, c.Key, changedValues(c))
		}
	}
}

// end hands the store what a round over reader r learnt: the results it
// computed are kept, those its own writes could alter dropped (or restored
// as they were before them), and the aggregates it computed whole are
// computed again for the reader alone and kept whole. The store then holds
// for r.Rev().
func (a *aggregates) end(r facts.Reader, ra *roundAggs) {
	if a.off {
		return
	}
	ov := ra.rd.ov
	ws := make([]written, 0, len(ov.w))
	for k, en := range ov.w {
		vals := append([]string{}, en.vals...) // every value the round gave it
		if f, ok := r.Get(k); ok {
			if v, ok := facts.StringValue(f.Value); ok {
				vals = append(vals, v) // and the one before
			}
		}
		ws = append(ws, written{k, vals})
	}
	own := a.ownOf(r, ra)
	a.store.keep(a.e.rs.Schema, r.Rev(), ra.computed, ra.adjusted, ws, ra.pristine)
	fresh := a.store.wholeEnd(ra.whole)
	a.keepWhole(r, fresh)
	if own != nil {
		for _, ag := range fresh {
			own.exempt[ag] = true // computed again for the reader alone
		}
	}
	a.own = own
}

// wholeKept is how many aggregates the store keeps whole.
func (a *aggregates) wholeKept() int { return len(a.store.whole) }

// aggInfo is what the evaluator knows of one aggregate.
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
	// member holds the variables of the match patterns: their values name
	// one member (the facts it is made of).
	member map[string]bool
	whole  bool // a round may compute every group at once (aggwhole.go)
	seq    int  // the order it was met in the rule set: for deterministic walks
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
	// hint is the values of p's fact its where admits, for a matched
	// pattern the where hints (rules.Scope.Hints); nil: any.
	hint []string
}

// build records each aggregate's group variables: the outer variables
// its patterns join on and those its where and of expressions read.
func (a *aggregates) build(rs *rules.RuleSet) {
	a.info, a.nested = map[*rules.Aggregate]*aggInfo{}, nil
	a.sites = map[*facts.FactType][]*siteGroup{}
	groups := map[string]*siteGroup{}      // by twinKey and pattern
	joins := map[string][]*rules.Pattern{} // by twinKey: the match patterns twins are joined by
	binds := map[*siteGroup][]string{}     // by site: its aggregate's bindKey
	a.heads = map[*rules.Choice][]bool{}
	add := func(ag *rules.Aggregate) {
		if a.info[ag] != nil {
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
		info := &aggInfo{timed: timed, adjustable: map[*rules.Pattern]bool{}, seq: len(a.info)}
		all := map[*facts.FactType]int{}
		bound := map[string]bool{}
		info.member = map[string]bool{}
		for _, p := range ag.Body.Match {
			for _, sg := range p.Segs {
				bound[sg.Var] = true
				if sg.Var != "" {
					info.member[sg.Var] = true
				}
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
		a.info[ag] = info
		if len(ag.Body.Aggregates) > 0 {
			a.nested = append(a.nested, ag)
		}
		tk, twins := a.twinKey(ag, info)
		if twins && joins[tk] == nil {
			// Copies, without the value hints a twin's where gives its
			// patterns: the join finds every twin's members, and each
			// twin's where counts its own.
			for _, p := range ag.Body.Match {
				c := *p
				joins[tk] = append(joins[tk], &c)
			}
		}
		bind := bindKey(ag)
		for k, p := range append(append(append([]*rules.Pattern{}, ag.Body.Match...), ag.Body.Optional...), ag.Body.Absent...) {
			site := aggSite{ag: ag, p: p}
			if !p.Optional && !p.Negated {
				site.hint = a.e.info(p).hint
			}
			var at string
			if twins {
				at = fmt.Sprintf("%s\x00%q %q %v %v", tk, p.Template, p.Alias, p.Optional, p.Negated)
				if g := groups[at]; g != nil {
					g.sites, binds[g] = append(g.sites, site), append(binds[g], bind)
					continue
				}
			}
			g := &siteGroup{sites: []aggSite{site}}
			binds[g] = []string{bind}
			match := ag.Body.Match
			if twins {
				match, groups[at] = joins[tk], g
			}
			for i, q := range match {
				if i != k { // k past the match patterns: the fact is joined with all of them
					g.rest = append(g.rest, q)
				}
			}
			a.sites[p.Type] = append(a.sites[p.Type], g)
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
			a.heads[r.Choose] = headAggregates(r)
		}
	}
	for g, b := range binds {
		g.order(b)
	}
}

// siteGroup is an aggregate pattern a written fact may match, with the
// same pattern of the aggregate's twins: adjusted together, the fact
// joined with rest, the match patterns, once for all (maintainSites).
type siteGroup struct {
	sites []aggSite
	rest  []*rules.Pattern
	// class numbers, by site, the optional and absent patterns of its
	// aggregate: twins of one class bind their members to the same
	// facts, and come one after the other (order).
	class []int
}

// order puts the twins with the same optional and absent patterns, binds
// by site (bindKey), one after the other, keeping their order otherwise,
// and numbers them.
func (g *siteGroup) order(binds []string) {
	first := map[string]int{}
	for i, b := range binds {
		if _, ok := first[b]; !ok {
			first[b] = i
		}
	}
	idx := make([]int, len(g.sites))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int { return first[binds[i]] - first[binds[j]] })
	sites, class := make([]aggSite, len(idx)), make([]int, len(idx))
	for n, i := range idx {
		sites[n], class[n] = g.sites[i], first[binds[i]]
	}
	g.sites, g.class = sites, class
}

// bindKey names an aggregate's optional and absent patterns.
func bindKey(ag *rules.Aggregate) string {
	var k strings.Builder
	for _, ps := range [][]*rules.Pattern{ag.Body.Optional, ag.Body.Absent} {
		for _, p := range ps {
			fmt.Fprintf(&k, "%q %q %v %v;", p.Template, p.Alias, p.Optional, p.Negated)
		}
		k.WriteByte('|')
	}
	return k.String()
}

// twinKey returns what makes aggregates twins, and whether ag may have
// any: twins have the same match patterns (templates and aliases, in the
// same order) and group variables, so that a changed fact joins into the
// same members of the same groups in each; their optional and absent
// patterns, where and what they fold may differ: the counts of one counts
// block (placed, starting, healthy... of a service's instances). A
// changed fact is joined once for all of them (maintainSites). An
// aggregate with aggregates of its own records what its adjustment reads,
// and one whose members do not name their group is adjusted through the
// groups the round holds (aggStore.partial): neither has twins.
func (a *aggregates) twinKey(ag *rules.Aggregate, info *aggInfo) (string, bool) {
	if len(ag.Body.Aggregates) > 0 || len(info.named) != len(info.group) {
		return "", false
	}
	var k strings.Builder
	for _, p := range ag.Body.Match {
		fmt.Fprintf(&k, "%q %q;", p.Template, p.Alias)
	}
	fmt.Fprintf(&k, "group %q", info.group)
	return k.String(), true
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

// lookup returns the value of an aggregate under s and the member
// reads it lists, without adding them to s.reads. The reads may be shared
// with the round's cache: callers copy them, never change them.
func (ra *roundAggs) lookup(ag *rules.Aggregate, s *sol) (ref.Val, []Read, error) {
	rd := ra.rd
	var info *aggInfo
	var gk string
	if !ra.a.off {
		info = ra.a.info[ag]
		ra.gkBuf = appendGroupKey(ra.gkBuf[:0], info, s.b)
		if e, ok := ra.cache[ag][string(ra.gkBuf)]; ok {
			rd.e.stats.AggregateHits++
			if rd.ov.rec != nil {
				rd.ov.rec.merge(e.deps)
			}
			return e.val, e.reads[:min(len(e.reads), rd.e.maxAggReads)], nil
		}
		if ra.isWhole(ag) {
			// A group not held has no member. Its result is the round's
			// alone, like the held ones computed at once.
			rd.e.stats.AggregateHits++
			if rd.ov.rec != nil {
				rd.ov.rec.merge(nil)
			}
			v, _, _, _ := rd.fold(ag, nil, nil) // what a group without members holds
			return v, nil, nil
		}
	}
	if info != nil {
		gk = string(ra.gkBuf) // before computing: a nested aggregate reuses the buffer
	}
	mark := len(s.reads)
	parent := rd.ov.rec
	d := &deps{tooMany: info != nil && info.timed, max: rd.e.maxDeps}
	rd.ov.rec = d
	rd.e.stats.Aggregates++
	visited := rd.e.stats.FactsVisited
	v, exact, err := rd.computeAggregate(ag, s)
	visited = rd.e.stats.FactsVisited - visited
	rd.ov.rec = parent
	if parent != nil {
		parent.merge(d)
	}
	if err != nil {
		return nil, nil, err
	}
	rs := append([]Read(nil), s.reads[mark:]...)
	s.reads = s.reads[:mark]
	if d.tooMany && !d.impure && info != nil && !info.timed && len(ag.Body.Aggregates) == 0 {
		// Too many reads to list, but every one a fact of its own
		// patterns, each of which adjusts or drops it when it changes:
		// kept by adjusting alone, as a result adjusted since its
		// computation is (deps.adjusted), and dropped with those by a
		// batch the store does not adjust for. Dropped instead, a large
		// service's counts computed in a round were counted again in
		// every round that read them.
		d = &deps{adjusted: true}
	}
	if !ra.a.off {
		if ra.cache[ag] == nil {
			ra.cache[ag] = map[string]aggEntry{}
		}
		outer := outerOf(info, s.b)
		ra.cache[ag][gk] = aggEntry{val: v, reads: rs, deps: d, exact: exact, outer: outer}
		if len(info.named) < len(info.group) {
			ra.a.store.listPartial(ag, info, gk, outer)
		}
		ra.computed = append(ra.computed, aggRef{ag, gk, d})
		ra.computedOne(ag, info, visited)
	}
	return v, rs, nil
}

// MaxAggregateReads bounds, by default (WithMaxAggregateReads), the member
// facts one aggregate lists in a firing's reads. They are not guarded,
// only recorded, and the record holds the aggregate's value among its
// bindings: the members listed show which facts it counted, a count over a
// thousand instances names 8 of them, not all. At 64 the members were 85 %
// of a stop's record, 300 MB of records written through etcd and back in
// the scale-down of 100,000 instances (BENCHMARKS.md).
const MaxAggregateReads = 8

// computeAggregate computes an aggregate under s. A sum of doubles is
// exact: its members are added as the rationals their binary values are,
// and the total rounded once (exact, also returned, is how a cached result
// is adjusted), so that it does not depend on the order of its members,
// nor on members added and taken out again.
func (rd *round) computeAggregate(ag *rules.Aggregate, s *sol) (_ ref.Val, exact *big.Rat, err error) {
	var v ref.Val
	b := s.b
	if ag.Params != nil {
		// A shared aggregate's other names are its own, whatever the rule
		// binds under the same names.
		b = rd.borrowOnly(b, ag.Params)
		defer rd.giveBack(b)
	}
	members := rd.solve(ag.Body, b, nil)
	v, exact, s.reads, err = rd.fold(ag, members, s.reads)
	rd.release(members)
	return v, exact, err
}
