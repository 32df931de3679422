package eval

import (
	"cmp"
	"encoding/binary"
	"math/big"
	"slices"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/traits"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// Adjusting a round's results for its own writes (aggregates.go): a
// written fact's members are found by joining it with the rest of each
// aggregate pattern it matches, and taken out of their group's result
// under the value before the write, put in under the value after.

// changed keeps the cached groups right across a write: it is called
// with the old value before the write (sign -1) and the new one after it
// (sign +1). The members the fact adds or removes are found by joining it
// with the rest of the aggregate's patterns; count and sum are adjusted,
// min and max take an added member; anything else (a removed min or max, a
// fact of an optional or absent pattern, a group the fact does not name)
// drops the cached result, to be recomputed when next needed.
func (ra *roundAggs) changed(key string, value []byte, sign int) {
	rd := ra.rd
	if ra.a.off || (len(ra.cache) == 0 && len(ra.whole) == 0) {
		return
	}
	kt, err := rd.e.rs.Schema.KeyType(key)
	if err != nil {
		return
	}
	ra.parts = facts.SplitKey(ra.parts[:0], key)
	parts := ra.parts
	kb := scratch(&ra.factB)
	for _, g := range ra.a.sites[kt] {
		ra.maintainSites(g, key, parts, kb, value, sign)
	}
}

// twin is one of the aggregates maintainSites adjusts at once.
type twin struct {
	s       aggSite
	class   int // its optional and absent patterns (siteGroup.class)
	info    *aggInfo
	entries map[string]aggEntry
	whole   bool
	adjust  bool
}

// maintainSites is changed for one aggregate pattern the fact may match,
// and the same pattern of the aggregate's twins (aggregates.go): the
// members the fact adds or removes are found by one join, bound to their
// optional and absent facts once for the twins that have the same, and
// each twin counts those its own where lets through.
func (ra *roundAggs) maintainSites(g *siteGroup, key string, parts []string, kb *binding, value []byte, sign int) {
	rd := ra.rd
	var buf [8]twin
	ts := buf[:0]
	for i, s := range g.sites {
		if ra.only != nil && !ra.only[s.ag] || ra.except[s.ag] {
			continue
		}
		entries := ra.cache[s.ag]
		whole := ra.isWhole(s.ag)
		if len(entries) == 0 && !whole {
			continue
		}
		ts = append(ts, twin{s: s, class: g.class[i], entries: entries, whole: whole})
	}
	if len(ts) == 0 {
		return
	}
	s := ts[0].s // the patterns joined, alike in every twin
	// Adjusting across rounds records what it reads for the results it
	// adjusts (aggstore.go) when they have aggregates of their own: a
	// change of a nested aggregate's member alters the result through its
	// where, and only the store's index finds it then. What an aggregate
	// without them reads while adjusting is facts of its own patterns,
	// and a later change of one of those finds the result through them
	// here, as a kept whole aggregate's are found: adjusted or dropped.
	// (A batch the store drops results for instead drops every adjusted
	// one: aggStore.dropAdjusted.) Such an aggregate has no twin.
	var sd *deps
	if ra.touched != nil && len(s.ag.Body.Aggregates) > 0 {
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
	n := 0
	for _, t := range ts {
		t.info = ra.a.info[t.s.ag]
		t.adjust = t.info.adjustable[t.s.p]
		if t.adjust && ra.seen != nil && sd == nil && (s.p.Optional || s.p.Negated) && ra.sawJoin(t.info, kb) {
			// Another optional or absent fact under the same binding found
			// the same members this pass, by the same join, and each is
			// adjusted already. (A result with aggregates of its own records
			// every changed fact: sd.)
			continue
		}
		if t.adjust && sd == nil && t.s.hint != nil && !admitted(value, t.s.hint) {
			// The twin's where admits no member whose fact has this value
			// (`state == 'failed'` on "running"): it is in none of its
			// groups, before or after. (A twin that cannot adjust drops
			// what the fact could alter; one with aggregates of its own
			// records the fact: sd.)
			continue
		}
		ts[n] = t
		n++
	}
	if ts = ts[:n]; len(ts) == 0 {
		return
	}
	info := ts[0].info // the twins' group variables are alike
	// An optional fact's value is bound by contribute, as the member sees it.
	if s.p.Alias != "" && value != nil && !s.p.Optional {
		if v, err := rd.e.values.decode(s.p.Type, value); err == nil {
			kb.push(s.p.Alias, v)
		}
	}
	all := false
	type member struct {
		gk     string
		b      *binding
		lo, hi int    // its reads: arena[lo:hi]
		key    string // b.key(), for the sort
		// What bind bound it to: the optional and absent patterns of
		// twins of this class (-1: none yet), whether it is a member by
		// them, and its reads with theirs, oarena[olo:ohi]. Its binding
		// before them is b[:base].
		bound    int
		in       bool
		base     int
		olo, ohi int
	}
	var members []member
	reads := rd.borrowReads(nil)
	// The members' reads, one after the other. A slice of each member's
	// own, grown by contribute, was a twentieth of what the large preset
	// allocated.
	arena, oarena := rd.borrowReads(nil), rd.borrowReads(nil)
	defer func() { rd.giveReads(reads); rd.giveReads(arena); rd.giveReads(oarena) }()
	addMember := func(gk string, b *binding) {
		lo := len(arena)
		arena = append(arena, reads...)
		members = append(members, member{gk: gk, b: b, lo: lo, hi: len(arena), base: b.len(), bound: -1})
	}
	rd.e.stats.Adjustments++
	rd.join(g.rest, kb, &reads, func() bool {
		complete := true
		for _, v := range info.group {
			if !kb.has(v) {
				complete = false
			}
		}
		if complete {
			// The key is looked up from a buffer, and made a string only
			// for a member: most joins find a group no one holds.
			ra.adjB = appendGroupKey(ra.adjB[:0], info, kb)
			for _, t := range ts {
				if _, held := t.entries[string(ra.adjB)]; held || t.whole {
					addMember(string(ra.adjB), rd.borrow(kb)) // bind adds the optionals to it
					return true
				}
			}
			return true // nothing to adjust: a placement exposing 8080 is in the group of every service exposing it
		}
		// The fact does not name its group (the rule's outer values
		// its where reads): it is a member of every cached group that
		// agrees with what it does name. (Such an aggregate has no
		// twin: ts holds it alone.)
		for _, i := range info.named {
			if !kb.has(info.group[i]) {
				all = true // drop them all
				return false
			}
		}
		pk := partialKey(info, func(i int) string { return kb.str(info.group[i]) })
		for _, gk := range ra.a.store.partial[s.ag][pk] {
			e, ok := ts[0].entries[gk]
			if !ok {
				continue
			}
			if b, ok := withOuter(info, kb, e.outer); ok {
				addMember(gk, b)
			}
		}
		return true
	})
	if all {
		delete(ra.cache, s.ag)
		ra.notWhole(s.ag)
		ra.bumpAll(s.ag)
		return
	}
	// The join visits in index order; the cached reads end up in plans.
	if len(members) > 1 {
		for i := range members {
			members[i].key = members[i].b.key()
		}
		slices.SortFunc(members, func(a, b member) int { return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.gk, b.gk)) })
	}
	// bind binds member m to t's optional and absent facts, once for the
	// twins that have the same (one after the other in the group), and
	// returns its reads with theirs.
	bind := func(m *member, t *twin) []Read {
		if m.bound != t.class {
			m.b.truncate(m.base)
			m.olo = len(oarena)
			oarena = append(oarena, arena[m.lo:m.hi]...)
			m.in = rd.optionalAndAbsent(t.s.ag.Body, m.b, &oarena)
			m.bound, m.ohi = t.class, len(oarena)
		}
		return oarena[m.olo:m.ohi]
	}
	// A fact of a match pattern is not among the member's reads the join
	// and contribute list; one of an optional or absent one is.
	self := !s.p.Optional && !s.p.Negated
	for ti := range ts {
		t := &ts[ti]
		ag, entries := t.s.ag, t.entries
		for i := range members {
			m := &members[i]
			e, held := entries[m.gk]
			if !held && !t.whole {
				continue // nothing to adjust
			}
			if held && ra.touched == nil && !e.own && (e.deps != nil && !e.deps.tooMany && !e.deps.impure || e.deps == nil && ra.keptWhole(ag)) {
				ra.pristine = append(ra.pristine, pristine{ag, m.gk, e}) // as the reader has it
			}
			if !held {
				e = ra.emptyGroup(ag, t.info, m.b) // whole: a group not held has no member
			}
			if !t.adjust {
				delete(entries, m.gk)
				ra.notWhole(ag)
				ra.bumpGroup(t.info, m.gk)
				continue
			}
			if ra.seen != nil && ra.sawMember(t.info, m.b, m.gk) {
				if held && sd != nil { // adjusted for an earlier change: what this one read still counts
					*ra.touched = append(*ra.touched, aggRef{ag: ag, gk: m.gk, d: sd})
				}
				continue
			}
			mreads := bind(m, t)
			was := e.val
			var member, ok bool
			if e, member, ok = ra.contribute(ag, e, m.b, m.in, sign); !ok {
				delete(entries, m.gk)
				ra.notWhole(ag)
				ra.bumpGroup(t.info, m.gk)
				continue
			}
			if !held && (!member || sign < 0) {
				if member { // a member leaving a group not held: it was not whole
					ra.notWhole(ag)
				}
				continue
			}
			if sign < 0 && member {
				// The member's facts leave the listed reads, as a
				// recomputation would not list them.
				keys := ra.keys[:0]
				if self {
					keys = append(keys, key)
				}
				ra.keys = appendReadKeys(keys, mreads)
				e.reads = withoutReads(e.reads, ra.keys...)
			}
			if sign > 0 && member && len(e.reads) < rd.e.maxAggReads {
				e.reads = append([]Read(nil), e.reads...)
				if self {
					e.reads = append(e.reads, ra.writtenRead(key))
				}
				for _, r := range mreads { // the member's other facts, as a recomputation would list them
					if !r.Prefix {
						r.NoGuard = true
						e.reads = append(e.reads, r)
					}
				}
			}
			if ra.touched == nil {
				e.deps = nil // no longer what its computation read: not kept across rounds
				e.own = true
				ra.adjusted = append(ra.adjusted, aggRef{ag: ag, gk: m.gk})
			} else {
				*ra.touched = append(*ra.touched, aggRef{ag: ag, gk: m.gk, d: sd})
			}
			entries[m.gk] = e
			if !held || !sameVal(was, e.val) {
				ra.bumpGroup(t.info, m.gk) // the candidate memo reads values alone
			}
		}
	}
	for _, m := range members { // contribute evaluated on them and kept none
		rd.giveBack(m.b)
	}
}

// sawJoin reports whether advance's pass joined this binding of an
// optional or absent fact of the aggregate already, and notes it.
func (ra *roundAggs) sawJoin(info *aggInfo, kb *binding) bool {
	k := binary.AppendUvarint(append(ra.seenB[:0], 'j'), uint64(info.seq))
	return ra.saw(kb.appendKey(k, nil))
}

// sawMember reports whether advance's pass adjusted this member of the
// aggregate's group gk already (a member is named by its match facts), and
// notes it.
func (ra *roundAggs) sawMember(info *aggInfo, m *binding, gk string) bool {
	k := binary.AppendUvarint(append(ra.seenB[:0], 'm'), uint64(info.seq))
	k = append(append(k, gk...), 0)
	return ra.saw(m.appendKey(k, func(name string) bool { return info.member[name] }))
}

// saw reports whether seen holds k, and adds it.
func (ra *roundAggs) saw(k []byte) bool {
	ra.seenB = k
	if _, ok := ra.seen[string(k)]; ok {
		return true
	}
	ra.seen[string(k)] = struct{}{}
	return false
}

// contribute adds (sign +1) or removes (sign -1) the member m to or from a
// cached group result, m bound to its optional and absent facts, by which
// it is a member or not (in); member is false when m is not one (nothing
// changes); ok false means the result must be recomputed.
func (ra *roundAggs) contribute(ag *rules.Aggregate, e aggEntry, m *binding, in bool, sign int) (_ aggEntry, member, ok bool) {
	rd := ra.rd
	if !in {
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

// withoutReads returns reads without one listing of each key, as a
// recomputation without a member would list them: reads itself when it
// lists none of them (a member past the listed ones, as most of a large
// group's are), else a copy.
func withoutReads(reads []Read, keys ...string) []Read {
	var small [16]bool // a member's facts: a handful
	taken := small[:]
	if len(keys) > len(small) {
		taken = make([]bool, len(keys))
	}
	var out []Read
	for i, r := range reads {
		j := -1
		for k, key := range keys {
			if !taken[k] && key == r.Key {
				j = k
				break
			}
		}
		switch {
		case j >= 0:
			taken[j] = true
			if out == nil {
				out = append(make([]Read, 0, len(reads)-1), reads[:i]...)
			}
		case out != nil:
			out = append(out, r)
		}
	}
	if out == nil {
		return reads
	}
	return out
}

// appendReadKeys appends the keys of the reads a recomputation lists (not
// prefixes).
func appendReadKeys(dst []string, reads []Read) []string {
	for _, r := range reads {
		if !r.Prefix {
			dst = append(dst, r.Key)
		}
	}
	return dst
}

// writtenRead is how a cached result lists a fact that joined it through
// changed: a write of the round (own), or in the store's overlay the
// committed fact with its revision.
func (ra *roundAggs) writtenRead(key string) Read {
	rd := ra.rd
	if e, ok := rd.ov.w[key]; ok && rd.ov.committed {
		return Read{Key: key, Rev: e.f.ModRevision, NoGuard: true}
	}
	return Read{Key: key, Own: true, NoGuard: true}
}
