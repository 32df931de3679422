package eval

import (
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
// The groups computed at once are the round's alone: what they read is
// not recorded, so they are dropped at the round's end (rd.adjusted), as
// the results the round's own writes adjusted are. The round's writes
// adjust them as they adjust any cached group, and one that joins a group
// not held creates it. Anything that drops a group instead (a pattern that
// cannot be adjusted, a min or max losing its member) makes the aggregate
// no longer whole for the rest of the round.

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
func (rd *round) isWhole(ag *rules.Aggregate) bool {
	w := rd.whole[ag]
	return w != nil && w.whole
}

// notWhole records that ag lost a group: a group not held may have members.
func (rd *round) notWhole(ag *rules.Aggregate) {
	if w := rd.whole[ag]; w != nil {
		w.whole = false
	}
}

// computedOne counts the facts a group computed on its own visited, and
// computes ag whole once they reach the limit.
func (rd *round) computedOne(ag *rules.Aggregate, info *aggInfo, visited int64) {
	if !info.whole || rd.e.wholeAfter == -1 {
		return
	}
	w := rd.whole[ag]
	if w == nil {
		if rd.whole == nil {
			rd.whole = map[*rules.Aggregate]*wholeState{}
		}
		w = &wholeState{limit: -1}
		for _, p := range ag.Body.Match {
			if n := int64(rd.ov.base.CountOfType(p.Type)); w.first == nil || n < w.limit {
				w.first, w.limit = p, n
			}
		}
		if rd.e.wholeAfter != wholeAuto {
			w.limit = rd.e.wholeAfter
		}
		rd.whole[ag] = w
	}
	w.visited += visited
	if w.tried || w.visited < w.limit {
		return
	}
	w.tried = true
	rd.computeWhole(ag, info, w)
}

// computeWhole computes every group of ag with a member that the cache does
// not hold: each fact of the smallest fact type, joined with the rest.
func (rd *round) computeWhole(ag *rules.Aggregate, info *aggInfo, w *wholeState) {
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
	entries := rd.aggCache[ag]
	if entries == nil {
		entries = map[string]aggEntry{}
		rd.aggCache[ag] = entries
	}
	for _, gk := range order {
		if _, ok := entries[gk]; ok {
			continue // held already, and right for the round so far
		}
		ms := groups[gk]
		v, exact, reads, err := rd.fold(ag, ms, nil)
		if err != nil {
			return // not whole: the group computed on its own reports the error
		}
		entries[gk] = aggEntry{val: v, reads: reads, exact: exact, outer: outerOf(info, ms[0].b)}
		rd.adjusted = append(rd.adjusted, aggRef{ag: ag, gk: gk}) // dropped at the round's end
	}
	w.whole = true
}

// emptyGroup is the result of a group without members: what fold gives
// for none.
func (rd *round) emptyGroup(ag *rules.Aggregate, info *aggInfo, b *binding) aggEntry {
	v, exact, _, _ := rd.fold(ag, nil, nil)
	return aggEntry{val: v, exact: exact, outer: outerOf(info, b)}
}
