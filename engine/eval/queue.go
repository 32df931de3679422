package eval

import (
	"slices"
	"strings"
)

// A round's queues across rounds. A round cut at its budget carries its
// tasks not yet run to the next call (carry), and that round runs them
// first. They are carried as queues, not as a list to queue again: by rule
// index, each rule's tasks in key order without repeats, the order a pass
// runs them in. The next round takes them as they are (install); a task
// its changes queue is checked against them by binary search (push), and
// a pass merges the few it queued into them (settle). A backlog carried
// round after round (a scale-down's stops, reported faster than the
// rounds note them; 100,000 instances waiting to be scheduled) was queued
// again task by task and sorted again whole every round: a fifth of what a
// scale-down's rounds allocated.

func byKey(a, b task) int { return strings.Compare(a.key, b.key) }

// carry hands the tasks the round did not run to the next call, asking
// for it at once (More): first, then the queues of the rules carried
// names, then the parked tasks (which alone would not ask for it at once).
// They go as queues by rule index, each rule's in key order, the first of
// each key kept, as push keeps the first it is handed; a rule's whole
// task (key "") subsumes its others, as in push.
func (rd *round) carry(first []task, carried func(i int) bool) {
	n := len(rd.e.rs.Rules)
	out := byRule(first, n)
	more := false
	for i := range n {
		ts := out[i]
		if carried(i) {
			if len(ts) == 0 {
				ts = settle(rd.queue[i], rd.sorted[i], true) // the common case: no copy when nothing was queued to it
			} else {
				ts = append(ts, rd.queue[i]...)
				ts = settle(ts, sortedPrefix(ts), false)
			}
			rd.queue[i], rd.sorted[i] = nil, 0
		} else {
			ts = settle(ts, sortedPrefix(ts), false)
		}
		out[i] = whole(ts)
		more = more || len(out[i]) > 0
	}
	rd.plan.More = more
	if len(rd.parked) > 0 {
		// A stopped rule's, in the order it met them: sorted in, as
		// queues are.
		for i, ts := range byRule(rd.parked, n) {
			if len(ts) > 0 {
				ts = append(slices.Clip(out[i]), ts...)
				out[i] = whole(settle(ts, sortedPrefix(ts), false))
			}
		}
	}
	rd.e.carry = out
}

// byRule groups tasks by rule index, in the order they come, each named
// by its binding unless it is: a binding a budget cut (body), and a task
// push parked, are named here.
func byRule(tasks []task, n int) [][]task {
	out := make([][]task, n)
	for _, t := range tasks {
		if t.key == "" {
			t.key = t.b.key()
		}
		out[t.r.Index] = append(out[t.r.Index], t)
	}
	return out
}

// whole keeps of a queue in key order its whole task alone, if it has
// one: it subsumes the others.
func whole(ts []task) []task {
	if len(ts) > 0 && ts[0].key == "" {
		return ts[:1]
	}
	return ts
}

// sortedPrefix is how many of ts's first tasks are in key order without
// repeats.
func sortedPrefix(ts []task) int {
	for i := 1; i < len(ts); i++ {
		if ts[i-1].key >= ts[i].key {
			return i
		}
	}
	return len(ts)
}

// settle returns ts in key order without repeats, given that its first n
// are so: the rest, which are the caller's to reorder, are sorted and
// merged in, the first of equal keys kept; unique says the rest repeat no
// key (push queued them), so that their order among equals need not be
// kept. The first n are never written: they may be an earlier round's
// carried queue, which a round redone for an oscillation takes again.
func settle(ts []task, n int, unique bool) []task {
	if n == len(ts) {
		return ts
	}
	rest := ts[n:]
	if unique {
		slices.SortFunc(rest, byKey)
	} else {
		slices.SortStableFunc(rest, byKey)
		rest = slices.CompactFunc(rest, func(a, b task) bool { return a.key == b.key })
	}
	if n == 0 {
		return rest
	}
	head := ts[:n]
	out := make([]task, 0, len(head)+len(rest))
	for len(head) > 0 && len(rest) > 0 {
		switch c := strings.Compare(head[0].key, rest[0].key); {
		case c < 0:
			out, head = append(out, head[0]), head[1:]
		case c > 0:
			out, rest = append(out, rest[0]), rest[1:]
		default: // the head's came first
			out, head, rest = append(out, head[0]), head[1:], rest[1:]
		}
	}
	return append(append(out, head...), rest...)
}

// install makes the tasks the previous call carried the round's queues.
// A rule stopped for oscillating parks them instead, as push would.
func (rd *round) install(carried [][]task) {
	for i, ts := range carried {
		if len(ts) == 0 {
			continue
		}
		if r := rd.e.rs.Rules[i]; rd.stopped[r.Name] {
			if rd.oscillated[r.Name] {
				rd.parked = append(rd.parked, ts...)
			}
			continue
		}
		rd.queue[i], rd.sorted[i] = ts[:len(ts):len(ts)], len(ts) // an append copies: ts stays as it was
		if ts[0].key == "" {
			rd.queued[i][""] = true
		}
	}
}

// carriedHas reports whether the queue of rule i holds a carried task
// under key k (the queue's sorted prefix, which queued does not list).
func (rd *round) carriedHas(i int, k string) bool {
	ts := rd.queue[i][:rd.sorted[i]]
	lo, hi := 0, len(ts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ts[m].key < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(ts) && ts[lo].key == k
}

// take empties rule i's queue for a pass and returns its tasks in key
// order.
func (rd *round) take(i int) []task {
	ts := settle(rd.queue[i], rd.sorted[i], true)
	rd.queue[i], rd.sorted[i] = nil, 0
	clear(rd.queued[i])
	return ts
}
