package eval

import (
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// A round dispatches each of its firings' writes at once (read-your-writes):
// every site of every rule but the writer's own aggregates, choice and heads
// gets the change, and the tasks it makes run in the round or are carried
// to the next. When the plan commits, the same writes come back from the
// mirror in the next call's changes, and dispatched again they made the
// same tasks again, each finding what the round found: at 10,000 instances
// about 40,000 writes (an instance's creation, placement and endpoint),
// each reaching a dozen sites. A write that comes back as the round left
// it, from the value the round read, is now dispatched only to the sites
// the round left out: the writer's own (backWrites).

// backWrites is what a round wrote, for the next call to recognise its
// writes when they come back.
type backWrites struct {
	rev    int64 // the revision of the round's reader
	writes map[string]backWrite
}

// backWrite is one key a round wrote: the value it left (nil: deleted),
// the value its reader held (nil: none), and the rule that wrote it (nil
// when several did: each write left out another rule's sites).
type backWrite struct {
	value, before []byte
	writer        *rules.Rule
}

// backOf notes what rd wrote over its reader r; nil for a round that
// wrote nothing, or that stopped a rule (a problem, an oscillation): the
// stopped rule's tasks the writes made were dropped or parked, and its
// sites must have the writes when they come back.
func backOf(r facts.Reader, rd *round) *backWrites {
	if len(rd.ov.w) == 0 || rd.ov.committed || len(rd.stopped) > 0 {
		return nil
	}
	b := &backWrites{rev: r.Rev(), writes: make(map[string]backWrite, len(rd.ov.w))}
	for k, en := range rd.ov.w {
		var w backWrite
		if !en.deleted {
			w.value = en.f.Value
		}
		if f, ok := r.Get(k); ok {
			w.before = f.Value
		}
		if ws := rd.writers[k]; len(ws) > 0 {
			w.writer, _ = rd.e.rs.Rule(ws[0])
			for _, name := range ws[1:] {
				if name != ws[0] {
					w.writer = nil
					break
				}
			}
		}
		b.writes[k] = w
	}
	return b
}

// back reports whether c is one of b's writes come back: the first change
// of its key since b's round, from the value the round read to the one it
// left. It forgets the key either way, so that a later change of it is
// dispatched in full.
func (b *backWrites) back(c facts.Change) (backWrite, bool) {
	w, ok := b.writes[c.Key]
	if !ok {
		return backWrite{}, false
	}
	delete(b.writes, c.Key)
	if !cameBack(c, w.value, w.before) {
		return backWrite{}, false
	}
	return w, true
}
