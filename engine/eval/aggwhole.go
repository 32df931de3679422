package eval

import (
	"cmp"
	"slices"
	"sort"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// Whole aggregates. A group the cache does not hold is computed by joining
// the aggregate's patterns under the group's values: the scheduler's
// siblings, for one (node, service) pair, scans the node's placements for
// the service's instances. Scoring 64 candidate nodes for each instance
// asks for tens of thousands of such pairs a round, nearly all of them
// empty, and each costs a scan. When every group variable is one the
// members bind themselves, one scan of all the members finds every group
// that has any, and a group not found has none: after enough groups
// computed one at a time, the round computes the rest at once and answers
// for the empty ones without a scan.
//
// The round's writes adjust the groups computed at once as they adjust any
// cached group, and one that joins a group not held creates it. Anything
// that drops a group instead (a pattern that cannot be adjusted, a min or
// max losing its member) makes the aggregate no longer whole for the rest
// of the round.
//
// What the round computed at once held its own writes too, and what it
// read is not recorded: it is dropped at the round's end (ra.adjusted).
// The store then computes the aggregate whole again for the reader alone
// and keeps it whole (keepWhole, aggStore.whole): its groups are in no
// index, and only adjusting keeps them, so the next rounds answer every
// group, the empty ones too, without computing one. A round's own writes
// adjust them in place, and its end restores them as they were (pristine)
// and drops the groups the writes created; the writes adjust them again
// when they come back as changes. A batch the store cannot adjust for, or
// a group lost, drops the aggregate whole. Without this the scheduler's
// siblings were computed one (node, service) at a time in every round until
// it paid to compute them at once, and then computed at once again.

// wholeAuto is WithWholeAggregates' default: the limit is the size of the
// aggregate's smallest fact type.
const wholeAuto = -2

// wholeState is what a round knows of one aggregate's groups.
type wholeState struct {
	first   *rules.Pattern // the pattern of the smallest fact type: the scan that finds every member
	visited int64          // facts the groups computed one at a time visited
	limit   int64          // when visited reaches it, the rest are computed at once
	tried   bool           // computed at once already this round
	whole   bool           // every group with a member is held
	kept    bool           // whole in the store when the round began (aggStore.whole)
}

// wholeEligible reports whether an aggregate can be computed whole: its
// members name every group variable, its results do not follow the
// clock, and a written fact of any of its patterns adjusts them.
func wholeEligible(ag *rules.Aggregate, info *aggInfo) bool {
	if info.timed || len(info.group) == 0 || len(info.named) < len(info.group) ||
		len(ag.Body.Optional) > 0 || len(ag.Body.Absent) > 0 {
		return false
	}
	for _, p := range ag.Body.Match {
		if !info.adjustable[p] {
			return false
		}
	}
	return true
}

// isWhole reports whether the round holds every group of ag with a member.
func (ra *roundAggs) isWhole(ag *rules.Aggregate) bool {
	w := ra.whole[ag]
	return w != nil && w.whole
}

// keptWhole reports whether ag was whole in the store when the round began
// and still is: its held groups have no deps, and what the round's own
// writes adjust in them is restored at its end.
func (ra *roundAggs) keptWhole(ag *rules.Aggregate) bool {
	w := ra.whole[ag]
	return w != nil && w.kept && w.whole
}

// notWhole records that ag lost a group: a group not held may have members.
func (ra *roundAggs) notWhole(ag *rules.Aggregate) {
	if w := ra.whole[ag]; w != nil {
		if w.whole {
			ra.bumpAll(ag) // a group not held is computed now, not taken as empty
		}
		w.whole = false
	}
}

// computedOne counts the facts a group computed on its own visited, and
// computes ag whole once they reach the limit.
func (ra *roundAggs) computedOne(ag *rules.Aggregate, info *aggInfo, visited int64) {
	if !info.whole || ra.a.wholeAfter == -1 {
		return
	}
	w := ra.wholeState(ag)
	w.visited += visited
	if w.tried || w.visited < w.limit {
		return
	}
	w.tried = true
	ra.computeWhole(ag, info, w)
}

// wholeState returns what the round knows of ag's groups.
func (ra *roundAggs) wholeState(ag *rules.Aggregate) *wholeState {
	rd := ra.rd
	if w := ra.whole[ag]; w != nil {
		return w
	}
	if ra.whole == nil {
		ra.whole = map[*rules.Aggregate]*wholeState{}
	}
	w := &wholeState{limit: -1}
	for _, p := range ag.Body.Match {
		if n := int64(rd.ov.base.CountOfType(p.Type)); w.first == nil || n < w.limit {
			w.first, w.limit = p, n
		}
	}
	if ra.a.wholeAfter != wholeAuto {
		w.limit = ra.a.wholeAfter
	}
	ra.whole[ag] = w
	return w
}

// keepWhole computes again, for the reader alone, the aggregates a round
// computed whole, and keeps them whole in the store: later rounds answer
// every group of theirs without computing one, and adjusting keeps them
// (aggStore.whole). What the round computed whole held its own writes too
// and is dropped (ra.adjusted).
func (a *aggregates) keepWhole(r facts.Reader, ags []*rules.Aggregate) {
	if len(ags) == 0 {
		return
	}
	slices.SortFunc(ags, func(x, y *rules.Aggregate) int { return cmp.Compare(a.info[x].seq, a.info[y].seq) })
	ra := a.e.newRound(r, nil).aggs
	for _, ag := range ags {
		delete(a.store.groups, ag) // computed one at a time, in the store's indexes: now in none
		w := ra.wholeState(ag)
		visited := a.e.stats.FactsVisited
		ra.computeWhole(ag, a.info[ag], w)
		if !w.whole {
			delete(a.store.groups, ag)
			continue
		}
		a.store.whole[ag] = max(a.e.stats.FactsVisited-visited, 1)
	}
}

// computeWhole computes every group of ag with a member that the cache does
// not hold: each fact of the smallest fact type, joined with the rest.
func (ra *roundAggs) computeWhole(ag *rules.Aggregate, info *aggInfo, w *wholeState) {
	rd := ra.rd
	rd.e.stats.WholeAggregates++
	parent := rd.ov.rec
	rd.ov.rec = nil // not kept across rounds: what it reads is not recorded
	var members []*sol
	b := &binding{}
	rd.scan(w.first, b, func(f facts.Fact, _ bool) bool {
		mark := b.len()
		if rd.bindFact(w.first, f, b) {
			members = append(members, rd.solve(ag.Body, b, nil)...)
		}
		b.truncate(mark)
		return true
	})
	rd.ov.rec = parent
	// In member order, as a group's own join lists them (its outer values
	// are the same in each member and do not change the order).
	for _, m := range members {
		m.keyed()
	}
	sort.Slice(members, func(i, j int) bool { return members[i].key < members[j].key })
	groups := map[string][]*sol{}
	var order []string
	for _, m := range members {
		gk := groupKey(info, m.b)
		if _, ok := groups[gk]; !ok {
			order = append(order, gk)
		}
		groups[gk] = append(groups[gk], m)
	}
	entries := ra.cache[ag]
	if entries == nil {
		entries = map[string]aggEntry{}
		ra.cache[ag] = entries
	}
	for _, gk := range order {
		if _, ok := entries[gk]; ok {
			continue // held already, and right for the round so far
		}
		ms := groups[gk]
		v, exact, reads, err := rd.fold(ag, ms, nil)
		if err != nil {
			rd.release(members)
			return // not whole: the group computed on its own reports the error
		}
		entries[gk] = aggEntry{val: v, reads: reads, exact: exact, outer: outerOf(info, ms[0].b)}
		ra.adjusted = append(ra.adjusted, aggRef{ag: ag, gk: gk}) // dropped at the round's end
	}
	rd.release(members)
	w.whole = true
}

// emptyGroup is the result of a group without members: what fold gives
// for none.
func (ra *roundAggs) emptyGroup(ag *rules.Aggregate, info *aggInfo, b *binding) aggEntry {
	rd := ra.rd
	v, exact, _, _ := rd.fold(ag, nil, nil)
	return aggEntry{val: v, exact: exact, outer: outerOf(info, b)}
}
