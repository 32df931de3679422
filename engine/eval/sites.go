package eval

import (
	"fmt"
	"slices"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// site is a place in a rule where a changed fact can matter.
type site struct {
	r    *rules.Rule
	p    *rules.Pattern
	kind int
	sc   *rules.Scope // lifted: the scope holding p
	// choice: lifted from the choice's scope or its aggregates (its
	// candidates): answered from the rule's wait set when it has one.
	choice bool
	// lifted: the patterns of sc joined to find the body bindings, with the
	// changed value bound to p's alias and without (liftJoin).
	with, without []*rules.Pattern
	// joins name the joins of with and without (0: none): sites whose
	// changed pattern and joined patterns are alike find the same bindings
	// for a change, joined once (sharedJoin).
	joins [2]int
	// stamp: p is a stamp pattern of r (stamp.go): a value that only moves
	// on does not dispatch r.
	stamp bool
	// keep admits the variables a task of the site keeps: the body's (a
	// direct site), or the lifted ones with the value's alias and without
	// (keep[1]). Built once: searched for each variable of each change,
	// the rule's and the scope's sorted lists were a fifth of dispatch.
	keep [2]func(string) bool
}

const (
	// siteDirect: a pattern of the rule body (match, optional, absent); the
	// key's path variables are the partial binding.
	siteDirect = iota
	// siteLifted: a pattern of an aggregate or of the choice; the partial
	// bindings are found by joining the change with the rest of its scope
	// and keeping the body's variables.
	siteLifted
	// siteHead: a key under a derive head; the head's variables are the
	// partial binding, so a view is repaired when someone else touches it.
	siteHead
)

func buildSites(e *Evaluator, rs *rules.RuleSet) map[*facts.FactType][]site {
	out := map[*facts.FactType][]site{}
	joins := map[string]int{}
	joinOf := func(p *rules.Pattern, rest []*rules.Pattern, withValue bool) int {
		if len(rest) == 0 || e.noSharedJoins {
			return 0
		}
		k := fmt.Sprintf("%s\x00%s\x00%v", p.Template, p.Alias, withValue)
		for _, q := range rest {
			k += fmt.Sprintf("\x01%s\x00%s\x00%v\x00%v\x00%q", q.Template, q.Alias, q.Optional, q.Negated, e.info(q).hint)
		}
		id, ok := joins[k]
		if !ok {
			id = len(joins) + 1
			joins[k] = id
		}
		return id
	}
	add := func(s site) {
		switch s.kind {
		case siteLifted:
			s.joins = [2]int{joinOf(s.p, s.with, true), joinOf(s.p, s.without, false)}
			var with, without []string
			for _, n := range s.r.Body.Binds {
				if liftedVar(s.r, s.sc, n) {
					with = append(with, n)
					if n != s.p.Alias {
						without = append(without, n)
					}
				}
			}
			s.keep = [2]func(string) bool{oneOf(with), oneOf(without)}
		case siteDirect:
			s.keep[0] = oneOf(s.r.Body.Binds)
		}
		out[s.p.Type] = append(out[s.p.Type], s)
	}
	for _, r := range rs.Rules {
		for _, p := range r.Body.Match {
			add(site{r: r, p: p, kind: siteDirect, stamp: stampOnly(r, p)})
		}
		for _, p := range r.Body.Optional {
			add(site{r: r, p: p, kind: siteDirect})
		}
		for _, p := range r.Body.Absent {
			add(site{r: r, p: p, kind: siteDirect})
		}
		lift := func(sc *rules.Scope, choice bool) {
			for _, p := range append(append(append([]*rules.Pattern{}, sc.Match...), sc.Optional...), sc.Absent...) {
				add(site{r: r, p: p, kind: siteLifted, sc: sc, choice: choice, with: liftJoin(r, sc, p, true), without: liftJoin(r, sc, p, false)})
			}
		}
		for _, ag := range r.Body.Aggregates {
			lift(ag.Body, false)
		}
		if r.Choose != nil {
			lift(r.Choose.Body, true)
			for _, ag := range r.Choose.Body.Aggregates {
				lift(ag.Body, true)
			}
		}
		if r.Derives() {
			for _, h := range r.Heads {
				add(site{r: r, p: e.headPattern(h), kind: siteHead})
			}
		}
	}
	// A join no other site of its fact type has is not shared: keeping
	// what it found would copy every binding for no one.
	for _, ss := range out {
		n := map[int]int{}
		for _, s := range ss {
			n[s.joins[0]]++
			n[s.joins[1]]++
		}
		for i := range ss {
			for j, id := range ss[i].joins {
				if n[id] < 2 {
					ss[i].joins[j] = 0
				}
			}
		}
	}
	return out
}

// matchParts binds p's path variables into b (emptied first) from a key
// split at its slashes, or reports that the key does not fit p's literals.
// A change reaching many sites is split once and matched into one binding.
func matchParts(p *rules.Pattern, parts []string, b *binding) bool {
	b.truncate(0)
	if len(parts) != len(p.Segs) {
		return false
	}
	for i, sg := range p.Segs {
		if sg.Var == "" {
			if sg.Lit != parts[i] {
				return false
			}
			continue
		}
		if v, ok := b.get(sg.Var); ok {
			if v.str != parts[i] {
				return false
			}
			continue
		}
		b.push(sg.Var, strVal(parts[i]))
	}
	return true
}

// scratch returns *b, made on first use with room for a key's variables, a
// value and what a join adds: a round matches every change into one.
func scratch(b **binding) *binding {
	if *b == nil {
		*b = &binding{names: make([]string, 0, 16), vals: make([]val, 0, 16)}
	}
	return *b
}

// dispatch turns a changed fact into tasks. from is the rule whose firing
// wrote it (nil for a change from outside): a rule's own writes do not
// re-trigger its aggregates, its choice or its head, because the task that
// wrote already evaluated with read-your-writes.
func (rd *round) dispatch(c facts.Change, from *rules.Rule) { rd.dispatchTo(c, from, nil) }

// dispatchTo is dispatch to the sites of only's aggregates, choice and
// heads alone (only nil: every site): those a round's dispatch of only's
// write left out, for the write come back (ownback.go).
func (rd *round) dispatchTo(c facts.Change, from, only *rules.Rule) {
	kt, err := rd.e.rs.Schema.KeyType(c.Key)
	if err != nil {
		return
	}
	rd.parts = facts.SplitKey(rd.parts[:0], c.Key)
	parts := rd.parts
	rd.decoded = 0
	kb := scratch(&rd.dispatchB) // each site's match; enqueued as a copy
	clear(rd.joined)
	rd.joined = rd.joined[:0]
	rd.found.reset()
	for _, s := range rd.e.sites[kt] {
		if (rd.stopped[s.r.Name] && !rd.oscillated[s.r.Name]) || (from == s.r && s.kind != siteDirect) {
			continue
		}
		if only != nil && (s.r != only || s.kind == siteDirect) {
			continue
		}
		if !matchParts(s.p, parts, kb) {
			continue
		}
		switch s.kind {
		case siteDirect:
			if s.stamp && movedOnly(s.p, c) {
				continue
			}
			if dl := rd.e.deadlines[s.r.Index]; dl != nil && s.p.Alias == dl.alias && movedOnly(s.p, c) {
				if now, ok := rd.clockOf(s.p, c); ok {
					rd.due(s.r, dl, now)
					continue
				}
			}
			rd.enqueueKept(s.r, kb, s.keep[0])
		case siteHead:
			rd.enqueue(s.r, kb.clone())
		case siteLifted:
			n := kb.len()
			rd.lift(s, kb, c, true)
			kb.truncate(n)
			// An update replaced a value this pattern may join on: the group
			// of the old value is affected too, and the old value is not in
			// the change. Lift once more without it (a wider partial binding).
			if updated(c) && s.p.Alias != "" && liftedVar(s.r, s.sc, s.p.Alias) {
				rd.lift(s, kb, c, false)
			}
		}
	}
}

// changedValue is the decoded value of the change being dispatched, of
// p's fact type (every site dispatch visits has its type), decoded once
// for all its sites: a report of an instance's state reaches dozens.
func (rd *round) changedValue(p *rules.Pattern, c facts.Change) (val, bool) {
	if rd.decoded == 0 {
		rd.decoded = -1
		if v, err := rd.e.values.decode(p.Type, c.Value); err == nil {
			rd.decodedV, rd.decoded = v, 1
		}
	}
	return rd.decodedV, rd.decoded > 0
}

// lift finds the body bindings a change to an aggregate or choice pattern
// affects: it joins the changed fact with the rest of its scope and keeps
// the rule body's variables. When the join finds nothing (the fact's
// siblings are gone too), what the key itself binds is used. kb keeps what
// it had below its length on entry.
func (rd *round) lift(s site, kb *binding, c facts.Change, withValue bool) {
	if s.choice {
		if ws := rd.waitsFor(s.r); ws != nil && len(ws.b) == 0 {
			return // nothing waits: no binding of the rule can choose again
		}
	}
	// The value binds the alias even when the body does not use it: left
	// unbound, the join below finds it again by scanning every fact it
	// meets (every node's state, for a placement), and keeps the same
	// body bindings.
	if withValue && s.p.Alias != "" && c.Value != nil {
		if v, ok := rd.changedValue(s.p, c); ok {
			kb.push(s.p.Alias, v)
		}
	}
	rest := s.with
	if !withValue {
		rest = s.without
	}
	keep := s.keep[0]
	if !withValue {
		keep = s.keep[1]
	}
	if len(rest) == 0 {
		rd.enqueueLifted(s, kb, keep)
		return
	}
	id := s.joins[0]
	if !withValue {
		id = s.joins[1]
	}
	if j := rd.sharedJoin(id); j != nil {
		if len(j.found) == 0 {
			rd.enqueueLifted(s, kb, keep)
		}
		for _, b := range j.found {
			if !rd.enqueueLifted(s, b, keep) {
				break
			}
		}
		return
	}
	start := len(rd.found.ptrs)  // what it finds, for the alike sites (id > 0) only
	met, complete := false, true // met: the join found a binding
	reads := rd.borrowReads(nil)
	defer func() { rd.giveReads(reads) }()
	rd.join(rest, kb, &reads, func() bool {
		met = true
		if id > 0 {
			rd.found.ptrs = append(rd.found.ptrs, rd.found.copyOf(kb))
		}
		more := rd.enqueueLifted(s, kb, keep)
		complete = complete && more
		return more
	})
	if complete && id > 0 {
		n := len(rd.found.ptrs)
		rd.joined = append(rd.joined, liftJoined{id: id, found: rd.found.ptrs[start:n:n]})
	}
	if !met {
		rd.enqueueLifted(s, kb, keep)
	}
}

// A change of an instance's state reaches 53 patterns of the default
// policies' rules and aggregates, and 45 of them join it with the
// instance's service to find the bindings affected: the same join of the
// same key, once for each. A change's dispatch joins each alike site
// (site.joins) once and hands the others what it found.

// liftJoined is what one join of a change found: the bindings, each the
// change's key binding (with the value's alias, for a join with it) and
// the joined patterns' variables, copied into the round's foundArena.
type liftJoined struct {
	id    int
	found []*binding
}

// foundArena holds the bindings the joins of one change's dispatch found,
// until the next change's: nothing keeps them past it (an enqueue copies
// what it keeps). Cloned one by one, with room for eight more values as
// clone leaves, they were a sixth of what a medium converge allocated.
type foundArena struct {
	names []string
	vals  []val
	bs    []binding
	ptrs  []*binding // each join's list of what it found, one after the other
}

func (a *foundArena) reset() {
	a.names, a.vals, a.bs, a.ptrs = a.names[:0], a.vals[:0], a.bs[:0], a.ptrs[:0]
}

// copyOf copies b into the arena. The copy's slices are full (an append to
// them copies), and it stays valid when the arena grows: a grown slice is
// a new array, the old one stays as it was.
func (a *foundArena) copyOf(b *binding) *binding {
	n, v := len(a.names), len(a.vals)
	a.names = append(a.names, b.names...)
	a.vals = append(a.vals, b.vals...)
	a.bs = append(a.bs, binding{names: a.names[n:len(a.names):len(a.names)], vals: a.vals[v:len(a.vals):len(a.vals)]})
	return &a.bs[len(a.bs)-1]
}

// sharedJoin returns what the change being dispatched found by join id,
// when a site joined it already and saw it through (nil for id 0).
func (rd *round) sharedJoin(id int) *liftJoined {
	if id == 0 {
		return nil
	}
	for i := range rd.joined {
		if rd.joined[i].id == id {
			return &rd.joined[i]
		}
	}
	return nil
}

// enqueueLifted enqueues what a change to a lifted pattern affects: the
// body bindings kb holds, or for a candidate change of a rule with an exact
// wait set, its waiting bindings that agree with them. It reports whether
// another binding could enqueue more: not once the rule is queued whole, or
// its wait set is empty.
func (rd *round) enqueueLifted(s site, kb *binding, keep func(string) bool) bool {
	if s.choice {
		if ws := rd.waitsFor(s.r); ws != nil {
			rd.enqueueWaiting(s.r, ws, kb, keep)
			return len(ws.b) > 0
		}
	}
	rd.enqueueKept(s.r, kb, keep)
	return !rd.queued[s.r.Index][""]
}

// liftJoin returns the patterns of sc a change to p is joined with to find
// the body bindings it affects: those that bind a body variable the key (and
// with withValue, the value) leaves unbound, and those that bind the path
// variables these need, in scope order. The others could only filter: the
// bindings found are restricted to the body's variables, and a join that
// finds nothing enqueues what the key binds anyway, so joining them would
// repeat the same enqueue (and cost a lookup each per change).
func liftJoin(r *rules.Rule, sc *rules.Scope, p *rules.Pattern, withValue bool) []*rules.Pattern {
	bound := map[string]bool{}
	for _, v := range p.Vars() {
		bound[v] = true
	}
	if withValue && p.Alias != "" {
		bound[p.Alias] = true
	}
	var rest []*rules.Pattern
	for _, q := range sc.Match {
		if q != p && (withValue || q.Alias != p.Alias) {
			rest = append(rest, q)
		}
	}
	need := map[string]bool{}
	for _, q := range rest {
		for _, v := range patternVars(q) {
			if !bound[v] && liftedVar(r, sc, v) && (withValue || v != p.Alias) {
				need[v] = true
			}
		}
	}
	chosen := make([]bool, len(rest))
	for grew := true; grew; {
		grew = false
		for i, q := range rest {
			if chosen[i] || !slices.ContainsFunc(patternVars(q), func(v string) bool { return need[v] }) {
				continue
			}
			chosen[i], grew = true, true
			for _, v := range q.Vars() {
				if !bound[v] {
					need[v] = true
				}
			}
		}
	}
	var out []*rules.Pattern
	for i, q := range rest {
		if chosen[i] {
			out = append(out, q)
		}
	}
	return out
}

// oneOf returns a test of membership in names: a handful, compared in turn.
func oneOf(names []string) func(string) bool {
	names = slices.Clone(names)
	return func(n string) bool { return slices.Contains(names, n) }
}

// liftedVar reports whether a name a lifted pattern binds is the rule
// body's: not when the scope binds it itself (a shared aggregate's own
// names may repeat the rule's).
func liftedVar(r *rules.Rule, sc *rules.Scope, n string) bool {
	if !isBodyVar(r, n) {
		return false
	}
	_, own := slices.BinarySearch(sc.Binds, n)
	return !own
}

// patternVars lists the variables p binds: its path variables and its alias.
func patternVars(p *rules.Pattern) []string {
	if p.Alias == "" {
		return p.Vars()
	}
	return append(p.Vars(), p.Alias)
}

// updated reports whether a change may have replaced an existing value
// (rather than created or deleted the key). Changes from etcd say it by
// their revisions; the round's own writes are marked; a change without
// revisions might be either and counts as an update (the wider choice).
func updated(c facts.Change) bool {
	switch {
	case c.Deleted || c.CreateRevision == createdMark:
		return false
	case c.CreateRevision == updatedMark || c.CreateRevision == 0:
		return true
	}
	return c.CreateRevision != c.ModRevision
}

// The revision marks the round gives its own writes for dispatch.
const (
	updatedMark = -1 // the key existed
	createdMark = -2 // the key did not
)
