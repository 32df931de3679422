package eval

import (
	"bytes"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// A round's own writes, kept applied. A round adjusts the results it holds
// for each of its writes (aggadjust.go), and its end restored them as they
// were before (aggStore.keep: pristine), right for its reader alone; the
// writes, committed, came back in the next call's changes and were adjusted
// for again, the same joins a second time. They were half of what
// advancing the store cost: converging 10,000 instances, 54,500 of the
// 98,700 adjustments advancing made were for the engine's own writes.
//
// The round's end now notes its writes and, for each result they adjusted,
// what the round left (ownWrites). When the next call's changes hold every
// one of those writes come back as written (each key's first change in the
// batch, from the value the round read to the one it wrote), the store takes
// the round's results instead of the ones restored, and advances them for
// the other changes alone, from the state the writes left (advance: the
// state before the batch is the reader's, each changed key's value before
// its first change, and a key only the round wrote was not changed since).
// A write that did not come back (a plan not committed, or not yet) leaves
// the store as it was: restored, and advanced for every change.
//
// The aggregates a round's end computes whole again for the reader alone
// (keepWhole) are advanced for every change as before, the writes
// included: the round's results for them are not the ones kept. So are
// aggregates that read aggregates of their own, whose adjusting records
// what it reads (maintainSites), which a round's does not; the language
// writes none today (an aggregate's body takes no aggregate).
// A member read a result lists from the round's writes (Read.Own) takes the
// revision the write came back at.

// ownWrites is what a round's end notes of its own writes.
type ownWrites struct {
	rev    int64 // the revision of the round's reader
	writes map[string]ownWrite
	groups []ownGroup
	exempt map[*rules.Aggregate]bool // advanced for every change, the writes included
}

// ownWrite is one key the round wrote.
type ownWrite struct {
	value     []byte // what the round left (nil: deleted)
	before    []byte // what its reader held (nil: nothing)
	beforeRev int64
}

// ownGroup is a result the round's writes adjusted, as the round left it.
type ownGroup struct {
	ag   *rules.Aggregate
	gk   string
	e    aggEntry
	held bool  // false: the writes dropped it
	deps *deps // what computing it read, as the store keeps it (nil: a kept whole aggregate's group)
}

// ownOf notes what round ra wrote over reader r and what its writes made of
// the results they adjusted; called before the store restores them.
func (a *aggregates) ownOf(r facts.Reader, ra *roundAggs) *ownWrites {
	ov := ra.rd.ov
	if ov.committed {
		return nil
	}
	o := &ownWrites{rev: r.Rev(), writes: make(map[string]ownWrite, len(ov.w)), exempt: map[*rules.Aggregate]bool{}}
	for k, en := range ov.w {
		var w ownWrite
		if !en.deleted {
			w.value = en.f.Value
		}
		if f, ok := r.Get(k); ok {
			w.before, w.beforeRev = f.Value, f.ModRevision
		}
		o.writes[k] = w
	}
	for _, ag := range a.nested {
		o.exempt[ag] = true
	}
	type gref struct {
		ag *rules.Aggregate
		gk string
	}
	noted := make(map[gref]bool, len(ra.pristine))
	for _, p := range ra.pristine {
		noted[gref{p.ag, p.gk}] = true
		if o.exempt[p.ag] {
			continue
		}
		e, held := ra.cache[p.ag][p.gk]
		o.groups = append(o.groups, ownGroup{ag: p.ag, gk: p.gk, e: e, held: held, deps: p.e.deps})
	}
	// The groups the writes created in the aggregates kept whole: end
	// drops them, and no pristine result stands for them.
	for _, ref := range ra.adjusted {
		if !ra.keptWhole(ref.ag) || noted[gref{ref.ag, ref.gk}] {
			continue
		}
		noted[gref{ref.ag, ref.gk}] = true
		if e, held := ra.cache[ref.ag][ref.gk]; held {
			o.groups = append(o.groups, ownGroup{ag: ref.ag, gk: ref.gk, e: e, held: true})
		}
	}
	return o
}

// split parts changes into those of o's writes come back and the others,
// and returns the revision each written key holds: false when a write did
// not come back as the round wrote it.
func (o *ownWrites) split(changes []facts.Change) (rest []facts.Change, revs map[string]int64, ok bool) {
	revs = make(map[string]int64, len(o.writes))
	rest = make([]facts.Change, 0, len(changes))
	for _, c := range changes {
		w, mine := o.writes[c.Key]
		if _, seen := revs[c.Key]; !mine || seen {
			rest = append(rest, c) // another writer's, or a later change of a written key
			continue
		}
		if !cameBack(c, w.value, w.before) {
			return nil, nil, false
		}
		revs[c.Key] = c.ModRevision
	}
	for k, w := range o.writes {
		if _, back := revs[k]; back {
			continue
		}
		if !sameBytes(w.value, w.before) {
			return nil, nil, false // not come back (not committed, or not yet)
		}
		revs[k] = w.beforeRev // written as it was: nothing to come back
	}
	return rest, revs, true
}

// cameBack reports whether c is a write of value come back as written:
// from before, the value the writing round read (nil: none), to value
// (nil: deleted).
func cameBack(c facts.Change, value, before []byte) bool {
	return c.PrevKnown && sameBytes(c.Prev, before) && c.Deleted == (value == nil) && (c.Deleted || bytes.Equal(c.Value, value))
}

// sameBytes reports whether a and b are the same value, nil (no fact) apart
// from every value.
func sameBytes(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

// keepOwn puts in the store the results o's writes adjusted, as the round
// left them, in place of those restored as they were before: the writes
// came back, at the revisions revs.
func (a *aggregates) keepOwn(o *ownWrites, revs map[string]int64) {
	s := a.store
	for _, g := range o.groups {
		if o.exempt[g.ag] {
			continue
		}
		gs := s.groups[g.ag]
		cur, ok := gs[g.gk]
		e, good := g.e, g.held
		if good {
			e.deps, e.own = g.deps, false
			e.reads, good = committedReads(e.reads, revs)
		}
		switch {
		case g.deps == nil: // a kept whole aggregate's group, in no index
			if _, whole := s.whole[g.ag]; !whole || ok && cur.deps != nil {
				continue // no longer whole: end dropped its groups
			}
			if !good {
				s.notWhole(g.ag)
				continue
			}
			if gs == nil {
				gs = map[string]aggEntry{}
				s.groups[g.ag] = gs
			}
			gs[g.gk] = e
		case !ok || cur.deps != g.deps:
			// Not the result restored (dropped since): nothing to
			// replace. One standing for it would have to go.
			if ok {
				delete(gs, g.gk)
			}
		case !good:
			delete(gs, g.gk)
		default:
			g.deps.adjusted = true // as advance marks the results it adjusts
			gs[g.gk] = e
		}
	}
}

// committedReads returns reads with the round's own writes (Read.Own) read
// at the revisions they came back at; false when one is not among them.
func committedReads(reads []Read, revs map[string]int64) ([]Read, bool) {
	var out []Read
	for i, r := range reads {
		if !r.Own {
			if out != nil {
				out = append(out, r)
			}
			continue
		}
		rev, ok := revs[r.Key]
		if !ok {
			return nil, false
		}
		if out == nil {
			out = append(make([]Read, 0, len(reads)), reads[:i]...)
		}
		r.Rev, r.Own = rev, false
		out = append(out, r)
	}
	if out == nil {
		return reads, true
	}
	return out, true
}
