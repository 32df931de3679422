package eval

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// body solves a rule's body under b and completes each binding through its
// guard; it calls fn with each binding whose guard holds, in order.
func (rd *round) body(r *rules.Rule, b *binding, fn func(s *sol) error) error {
	sols := rd.solve(r.Body, b, nil)
	ver := rd.ov.version
	whole := b.len() == 0 && !r.Derives()
	off := 0 // where in the solutions' order sols starts
	if whole && len(sols) > 0 {
		// A whole evaluation the round's budget cut goes on where it
		// stopped: one that started from the first binding every time
		// (the engine evaluates a rule whole again after a write that did
		// not commit) would evaluate the same ones over and over, and
		// never reach the rest of a long list of pending instances.
		if off = rd.e.wholeAt[r.Index] % len(sols); off > 0 {
			sols = slices.Concat(sols[off:], sols[:off])
		}
		delete(rd.e.wholeAt, r.Index)
	}
	for i, s := range sols {
		if rd.atBudget() && !r.Derives() {
			// The round is full (WithMaxFirings), or its time ran out
			// (WithRoundBudget), maybe before this task's first binding:
			// each binding left becomes a task of its own for the next
			// call. A view's task is not split: it deletes what it no
			// longer derives. The task names its binding by the keys it
			// reads (the path variables), not by the values it found
			// there: it is evaluated against the facts as they are when
			// its turn comes, and a value that moved on since need not
			// dispatch the rule again (the clock a rule only stamps,
			// stamp.go), so a task held to the old value would find
			// nothing, and the binding would be lost for good.
			keys := rd.e.keyVars[r.Index]
			for _, rest := range sols[i:] {
				rd.leftover = append(rd.leftover, task{r: r, b: rest.b.restrict(func(n string) bool { return keys[n] }), rest: whole})
			}
			if whole {
				rd.e.wholeAt[r.Index] = off + i
			}
			return nil
		}
		if rd.ov.version != ver && !r.Derives() {
			// An earlier firing of this task wrote: make sure this binding
			// still holds (read-your-writes), re-reading its facts.
			again := rd.solve(r.Body, s.b.restrict(func(n string) bool { return isBodyVar(r, n) }), nil)
			if len(again) == 0 {
				continue
			}
			s = again[0]
		}
		err := rd.evalBinding(r, s, fn)
		if err == nil {
			continue
		}
		// A rule skips the one binding the world's data broke (a bad
		// value for one service must not stall the others) and goes on;
		// a view keeps the keys of the binding it skips as they are
		// (onSkip), rather than delete them. Over budget, a rule is
		// stopped: every binding would burn the budget.
		if errors.Is(err, errBudget) || errors.Is(err, errOscillation) || (r.Derives() && rd.onSkip == nil) {
			return err
		}
		if rd.onSkip != nil {
			rd.onSkip(s)
		}
		rd.plan.Problems = append(rd.plan.Problems, Problem{Rule: r.Name,
			Err: fmt.Errorf("binding %s skipped: %w", renderBinding(s.b, r.Body.Binds), err)})
	}
	return nil
}

// evalBinding evaluates one binding of the body through its guard and choice.
func (rd *round) evalBinding(r *rules.Rule, s *sol, fn func(s *sol) error) (err error) {
	held := false // the condition held, evaluated lazily
	if rd.e.lazy[r.Index] {
		// A condition found false decides nothing more; one that failed
		// is evaluated again below, to be reported as before.
		ok, err := rd.whenLazily(r, s)
		if err == nil && !ok {
			return nil
		}
		held = err == nil
	}
	if err := rd.complete(r.Body, s); err != nil {
		return err
	}
	if r.When != nil && !held {
		ok, whenErr := rd.evalBool(r.When, s.b, what{kind: "when"})
		if dl := rd.e.deadlines[r.Index]; dl != nil {
			b := rd.noteDeadline(dl, r, s, ok, whenErr)
			if ok && whenErr == nil {
				defer func() {
					if err != nil { // what follows the condition failed: due at the next move, as before
						dl.add(b, time.Time{})
					}
				}()
			}
		}
		if whenErr != nil || !ok {
			return whenErr
		}
	}
	g, err := rd.guardOf(r, s)
	if err != nil {
		return err
	}
	if g.barrier {
		rd.barrier = true
		defer func() { rd.barrier = false }()
	}
	if r.Choose == nil {
		s.reads = append(s.reads, g.reads...)
		return fn(s)
	}
	picks, err := rd.choose(r, s)
	rd.noteWaiting(r, s, err != nil || len(picks) == 0)
	if err != nil {
		return err
	}
	// Each pick fires on its own (its own record and transaction), all
	// decided on the same counts.
	for _, c := range picks {
		c.reads = append(c.reads, g.reads...)
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// renderBinding shows the path variables of a binding, e.g. {id=a8f31}.
func renderBinding(b *binding, names []string) string {
	var parts []string
	for _, n := range names {
		if v, ok := b.get(n); ok {
			parts = append(parts, n+"="+v.str)
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func isBodyVar(r *rules.Rule, n string) bool {
	i := sort.SearchStrings(r.Body.Binds, n)
	return i < len(r.Body.Binds) && r.Body.Binds[i] == n
}

// bodyKeyVars returns the path variables of r's body: the variables that
// name the facts a binding reads, whatever their values.
func bodyKeyVars(r *rules.Rule) map[string]bool {
	out := map[string]bool{}
	for _, ps := range [][]*rules.Pattern{r.Body.Match, r.Body.Optional, r.Body.Absent} {
		for _, p := range ps {
			for _, v := range p.Vars() {
				out[v] = true
			}
		}
	}
	return out
}

// act evaluates an action rule under b: every binding whose guard holds
// writes its heads (nothing when the values are already there).
func (rd *round) act(r *rules.Rule, b *binding) error {
	return rd.body(r, b, func(s *sol) error {
		if r.Fresh == nil {
			return rd.fire(r, s)
		}
		n := int64(1)
		if r.Fresh.Count != nil {
			v, err := rd.eval(r.Fresh.Count, s.b, what{kind: "fresh count"})
			if err != nil {
				return err
			}
			iv, ok := v.(types.Int)
			if !ok {
				return fmt.Errorf("fresh count %q: got %s, expected an int", r.Fresh.Count.Src, v.Type())
			}
			n = int64(iv)
		}
		if n > int64(rd.e.maxFresh) {
			// Reported, not stopped: the rest is drawn in the next rounds.
			rd.plan.Problems = append(rd.plan.Problems, Problem{Rule: r.Name,
				Err: fmt.Errorf("fresh count %q is %d; drawing the limit of %d this round", r.Fresh.Count.Src, n, rd.e.maxFresh)})
			n = int64(rd.e.maxFresh)
		}
		for i := int64(0); i < n; i++ {
			id, err := rd.draw(r, s.b)
			if err != nil {
				return err
			}
			mark := s.b.len()
			s.b.push(r.Fresh.Var, strVal(id))
			err = rd.fire(r, s)
			s.b.truncate(mark)
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// draw returns a fresh id no key of the rule's heads uses, in the overlay
// or among this round's earlier draws. A collision is redrawn.
func (rd *round) draw(r *rules.Rule, b *binding) (string, error) {
	for try := 0; try < 64; try++ {
		id := fmt.Sprintf("%05x", rd.e.rng.Uint32()&0xfffff)
		if rd.drawn[id] {
			rd.e.stats.FreshCollisions++
			continue
		}
		rd.drawn[id] = true
		taken := false
		for _, h := range r.Heads {
			if !usesVar(h, r.Fresh.Var) {
				continue
			}
			ent := entityPrefix(h, r.Fresh.Var, id, b)
			if _, ok, _ := rd.ov.get(ent); ok {
				taken = true
			} else {
				rd.ov.prefix(ent+"/", func(facts.Fact, bool) bool { taken = true; return false })
			}
			if taken {
				break
			}
		}
		if taken {
			rd.e.stats.FreshCollisions++
			continue
		}
		return id, nil
	}
	return "", fmt.Errorf("fresh %s: 64 draws in a row collided with existing ids", r.Fresh.Var)
}

func usesVar(h *rules.Head, v string) bool {
	for _, sg := range h.Segs {
		if sg.Var == v {
			return true
		}
	}
	return false
}

// entityPrefix is the head's key up to and including the fresh variable's
// segment, e.g. "observed/instance/a8f31": the entity the id names.
func entityPrefix(h *rules.Head, v, id string, b *binding) string {
	var out bytes.Buffer
	for i, sg := range h.Segs {
		if i > 0 {
			out.WriteByte('/')
		}
		switch sg.Var {
		case v:
			out.WriteString(id)
			return out.String()
		case "":
			out.WriteString(sg.Lit)
		default:
			out.WriteString(b.str(sg.Var))
		}
	}
	return out.String()
}

// fire computes the heads of an action under s and, when anything changes,
// adds the firing to the plan and applies it to the overlay. A fresh id's
// keys are absent, so they are read with Rev 0: created only if absent.
func (rd *round) fire(r *rules.Rule, s *sol) error {
	reads := append([]Read(nil), s.reads...)
	var writes []Write
	for _, h := range r.Heads {
		key := h.Format(s.b.str)
		cur, exists, own := rd.ov.get(key)
		if h.Kind == rules.Delete {
			if !exists {
				continue
			}
			writes = append(writes, Write{Key: key})
			reads = append(reads, readOf(cur, own))
			continue
		}
		raw, err := rd.value(h, key, s.b)
		if err != nil {
			return err
		}
		if exists && bytes.Equal(cur.Value, raw) {
			continue
		}
		writes = append(writes, Write{Key: key, Value: raw})
		if exists {
			reads = append(reads, readOf(cur, own))
		} else {
			reads = append(reads, Read{Key: key, Own: own})
		}
	}
	if len(writes) == 0 {
		return nil
	}
	return rd.commit(Firing{Rule: r.Name, Bindings: s.b.strings(), Reads: dedupReads(reads), Writes: dedupWrites(writes), Kind: "emit", AfterAll: rd.barrier})
}

// value evaluates a head's value and encodes it for the key's fact type.
func (rd *round) value(h *rules.Head, key string, b *binding) ([]byte, error) {
	v, err := rd.eval(h.Value, b, what{"value of", h.Template, ""})
	if err != nil {
		return nil, err
	}
	n, err := native(v)
	if err != nil {
		return nil, fmt.Errorf("value of %s: %v", key, err)
	}
	raw, err := rd.e.rs.Schema.Encode(key, n)
	if err != nil {
		return nil, fmt.Errorf("head %s: %w", h.Template, err)
	}
	return raw, nil
}

// dedupWrites keeps the last write of a key: two heads of one rule that
// happen to name the same key write it once (a transaction may not write a
// key twice), the later head winning as it would in order.
func dedupWrites(in []Write) []Write {
	last := make(map[string]int, len(in))
	for i, w := range in {
		last[w.Key] = i
	}
	if len(last) == len(in) {
		return in
	}
	out := make([]Write, 0, len(last))
	for i, w := range in {
		if last[w.Key] == i {
			out = append(out, w)
		}
	}
	return out
}

func dedupReads(in []Read) []Read {
	if len(in) <= dedupLinear {
		return dedupReadsLinear(in)
	}
	return dedupReadsMap(in)
}

// dedupReadsMap is dedupReads by a map of the keys kept.
func dedupReadsMap(in []Read) []Read {
	seen := make(map[string]int, len(in))
	out := in[:0]
	for _, r := range in {
		k := r.Key
		if r.Prefix {
			k += "\x00prefix"
		}
		if i, ok := seen[k]; ok {
			// A guarded read wins over an unguarded one of the same key.
			if out[i].NoGuard && !r.NoGuard {
				out[i] = r
			}
			continue
		}
		seen[k] = len(out)
		out = append(out, r)
	}
	return out
}

// dedupLinear is the reads up to which dedupReads compares each with those
// kept rather than building a map: most firings read a handful of keys,
// and the map (made per firing, every key hashed) cost more than the scan.
const dedupLinear = 16

// dedupReadsLinear is dedupReads by comparison, the same keys the same.
func dedupReadsLinear(in []Read) []Read {
	out := in[:0]
next:
	for _, r := range in {
		for i := range out {
			if sameReadKey(out[i], r) {
				if out[i].NoGuard && !r.NoGuard {
					out[i] = r
				}
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}

// sameReadKey reports whether dedupReads' map keys a and b the same: the
// key, with "\x00prefix" after it for a prefix read.
func sameReadKey(a, b Read) bool {
	if a.Prefix == b.Prefix {
		return a.Key == b.Key
	}
	if a.Prefix {
		a, b = b, a
	}
	const suffix = "\x00prefix"
	return len(a.Key) == len(b.Key)+len(suffix) && strings.HasPrefix(a.Key, b.Key) && strings.HasSuffix(a.Key, suffix)
}

// derived is one key a derive rule derives, with the binding that derived it.
type derived struct {
	raw []byte
	s   *sol
}

// deriveUnder computes the keys a derive rule derives under b, per head.
func (rd *round) deriveUnder(r *rules.Rule, b *binding) ([]map[string]derived, error) {
	out := make([]map[string]derived, len(r.Heads))
	for i := range out {
		out[i] = map[string]derived{}
	}
	parent := rd.onSkip
	defer func() { rd.onSkip = parent }()
	rd.onSkip = func(s *sol) {
		// A binding that cannot be evaluated keeps what it derived
		// before, unchanged: its key is neither rewritten nor deleted.
		for i, h := range r.Heads {
			if !headBound(h, s.b) {
				continue
			}
			key := h.Format(s.b.str)
			if _, dup := out[i][key]; dup {
				continue
			}
			if cur, ok, _ := rd.ov.get(key); ok {
				out[i][key] = derived{raw: cur.Value, s: &sol{b: s.b.clone()}}
			}
		}
	}
	err := rd.body(r, b, func(s *sol) error {
		for i, h := range r.Heads {
			key := h.Format(s.b.str)
			if _, dup := out[i][key]; dup {
				continue // the first binding in order wins
			}
			raw, err := rd.value(h, key, s.b)
			if err != nil {
				return err
			}
			out[i][key] = derived{raw: raw, s: &sol{b: s.b.clone(), reads: append([]Read(nil), s.reads...)}}
		}
		return nil
	})
	return out, err
}

// bindHead binds a key found under a view's head: a key there holding a
// value that breaks the schema (written by someone else) is the view's too,
// to overwrite or delete like any key it no longer derives.
func (rd *round) bindHead(hp *rules.Pattern, f facts.Fact, b *binding) bool {
	f.Invalid = ""
	return rd.bindFact(hp, f, b)
}

// headBound reports whether b binds every variable of h's key.
func headBound(h *rules.Head, b *binding) bool {
	for _, v := range h.Vars() {
		if !b.has(v) {
			return false
		}
	}
	return true
}

// derive maintains a rule's view for the keys affected under b: it puts
// what the body derives and deletes the keys under the head that no
// binding derives any more.
func (rd *round) derive(r *rules.Rule, b *binding) error {
	got, err := rd.deriveUnder(r, b)
	if err != nil {
		return err
	}
	// A key derived before by a binding that b does not constrain must be
	// re-checked on its own head variables before it is deleted.
	recheck := false
	for _, n := range b.names {
		in := false
		for _, h := range r.Heads {
			for _, v := range h.Vars() {
				in = in || v == n
			}
		}
		recheck = recheck || !in
	}
	for i, h := range r.Heads {
		hp := rd.e.headPattern(h)
		type staleKey struct {
			f   facts.Fact
			own bool
		}
		var stale []staleKey
		hb := b.restrict(func(n string) bool {
			for _, v := range h.Vars() {
				if v == n {
					return true
				}
			}
			return false
		})
		var reached []string
		byReach := false // the candidates are the keys b reaches, not every key under hb
		if recheck {
			reached, byReach = rd.reachable(r, h, b)
		}
		if byReach {
			// The keys b's bindings reach are those it may have derived.
			for _, k := range reached {
				if _, derivedNow := got[i][k]; derivedNow {
					continue
				}
				if f, exists, own := rd.ov.get(k); exists {
					stale = append(stale, staleKey{f, own})
				}
			}
		} else {
			rd.scan(hp, hb, func(f facts.Fact, own bool) bool {
				mark := hb.len()
				if rd.bindHead(hp, f, hb) {
					if _, ok := got[i][f.Key]; !ok {
						stale = append(stale, staleKey{f, own})
					}
				}
				hb.truncate(mark)
				return true
			})
		}
		// The indexes visit in no particular order; plans are deterministic.
		sort.Slice(stale, func(a, b int) bool { return stale[a].f.Key < stale[b].f.Key })
		for _, st := range stale {
			f := st.f
			if recheck {
				kb := &binding{}
				if rd.bindHead(hp, f, kb) {
					if !byReach && !rd.joinsWith(r, kb, b) {
						continue // derived by bindings b does not touch: not this task's to check
					}
					again, err := rd.deriveUnder(r, kb)
					if err != nil {
						return err
					}
					if d, ok := again[i][f.Key]; ok {
						got[i][f.Key] = d
						continue
					}
				}
			}
			kb := &binding{}
			rd.bindHead(hp, f, kb)
			if err := rd.commit(Firing{Rule: r.Name, Bindings: kb.strings(), Kind: "derive",
				Reads: []Read{readOf(f, st.own)}, Writes: []Write{{Key: f.Key}}}); err != nil {
				return err
			}
		}
		keys := make([]string, 0, len(got[i]))
		for k := range got[i] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d := got[i][k]
			cur, exists, own := rd.ov.get(k)
			if exists && bytes.Equal(cur.Value, d.raw) {
				continue
			}
			reads := append([]Read(nil), d.s.reads...)
			if exists {
				reads = append(reads, readOf(cur, own))
			} else {
				reads = append(reads, Read{Key: k, Own: own})
			}
			if err := rd.commit(Firing{Rule: r.Name, Bindings: d.s.b.strings(), Kind: "derive",
				Reads: dedupReads(reads), Writes: []Write{{Key: k, Value: d.raw}}}); err != nil {
				return err
			}
		}
	}
	return nil
}

// headPattern is a head seen as a pattern (no alias), to find the keys
// under it.
func (e *Evaluator) headPattern(h *rules.Head) *rules.Pattern {
	if p, ok := e.heads[h]; ok {
		return p
	}
	p := &rules.Pattern{Template: h.Template, Type: h.Type, Segs: h.Segs, Range: h.Range}
	e.heads[h] = p
	return p
}

// reachable returns the keys of head h that the rule's match patterns
// reach under b, the patterns b alone determines left out (see joinsWith):
// the keys b may have derived. ok is false when a solution leaves a head
// variable unbound; then the keys under the head are scanned instead.
func (rd *round) reachable(r *rules.Rule, h *rules.Head, b *binding) (keys []string, ok bool) {
	jb := b.clone()
	seen := map[string]bool{}
	ok = true
	var reads []Read
	rd.join(withoutOwn(r.Body.Match, b), jb, &reads, func() bool {
		for _, v := range h.Vars() {
			if !jb.has(v) {
				ok = false
				return false
			}
		}
		if k := h.Format(jb.str); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		return true
	})
	return keys, ok
}

// withoutOwn returns the patterns whose variables b does not all bind.
func withoutOwn(pats []*rules.Pattern, b *binding) []*rules.Pattern {
	var out []*rules.Pattern
	for _, p := range pats {
		for _, sg := range p.Segs {
			if sg.Var != "" && !b.has(sg.Var) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// joinsWith reports whether the rule's match patterns join under kb (a
// derived key's head variables) and b together, leaving out the patterns b
// alone determines (the changed fact that made b). A derived key none of
// whose bindings touch b was not derived through what changed; if it is no
// longer derived, the change of another of its facts checks it. Without
// this, a change that names no head variable (a node's state, for the
// endpoints of its instances) would check every key of the view.
func (rd *round) joinsWith(r *rules.Rule, kb, b *binding) bool {
	jb := kb.clone()
	for i, n := range b.names {
		if v, ok := jb.get(n); ok {
			if v.str != b.vals[i].str {
				return false
			}
			continue
		}
		jb.push(n, b.vals[i])
	}
	found := false
	var reads []Read
	rd.join(withoutOwn(r.Body.Match, b), jb, &reads, func() bool {
		found = true
		return false
	})
	return found
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
