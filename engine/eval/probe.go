package eval

import (
	"bytes"
	"unsafe"

	"github.com/ccattler/ccattler/rules"
)

// A change dispatches every rule with a pattern its key fits, under the
// variables the key binds: an instance's report reaches the rules about
// failed, stopped, unhealthy and deleted instances as well as those about
// running ones. Converging 10,000 instances queued ~180,000 such tasks
// that found nothing to do, each paying its queueing, its join and its
// task's setup. Most are known to find nothing before they run, from the
// one fact the binding names that their body needs: an instance without
// failed_at is not counted as a failure; one placed is not noted stopped;
// one whose state is "running" does not pass `state == 'failed'`.
//
// A probe is such a fact: a pattern of an action's body whose key the
// binding names whole. A task is needless when a fact its body matches is
// missing (or breaks the schema, so that no rule sees it), when a fact its
// body requires absent exists, or when a matched fact's value is a plain
// string its condition's hints (rules.Scope.Hints) do not admit. It is not
// queued then, nor run if that became so while it waited. Nothing is lost:
// the change that would make it find something (the fact written, the key
// deleted, the value changed) dispatches the rule again.
//
// Only actions have probes: a view's task under a binding that no longer
// holds deletes what it derived there. The hints are not used for a rule
// waiting for the clock (deadline.go), whose false conditions are noted.
type probe struct {
	p      *rules.Pattern
	absent bool     // the body requires the key absent
	hint   []string // the values the condition admits, for a matched pattern; nil: any
}

// buildProbes returns each rule's probes: its action body's matched
// patterns, then those it requires absent.
func (e *Evaluator) buildProbes() [][]probe {
	out := make([][]probe, len(e.rs.Rules))
	if e.noProbes {
		return out
	}
	for _, r := range e.rs.Rules {
		if r.Derives() {
			continue
		}
		var ps []probe
		for _, p := range r.Body.Match {
			if p.Optional || p.Negated {
				continue
			}
			pr := probe{p: p}
			if e.deadlines[r.Index] == nil {
				pr.hint = e.info(p).hint
			}
			ps = append(ps, pr)
		}
		for _, p := range r.Body.Absent {
			ps = append(ps, probe{p: p, absent: true})
		}
		out[r.Index] = ps
	}
	return out
}

// needless reports whether a task of r under b would find nothing to do,
// from the facts b names whole (see probe).
func (rd *round) needless(r *rules.Rule, b *binding) bool { return rd.needlessKept(r, b, nil) }

// needlessKept is needless(r, b.restrict(keep)) without the restricted
// binding (keep nil: all of b), for a task that may not be queued.
func (rd *round) needlessKept(r *rules.Rule, b *binding, keep func(string) bool) bool {
	ps := rd.e.probes[r.Index]
	if len(ps) == 0 || b.len() == 0 {
		return false
	}
	ov := rd.ov
	rec := ov.rec
	ov.rec = nil // a check of the queue, no aggregate's dependency
	defer func() { ov.rec = rec }()
	for i := range ps {
		pr := &ps[i]
		key, complete := appendNamed(rd.probeBuf[:0], pr.p, b, keep)
		rd.probeBuf = key
		if !complete {
			continue
		}
		f, ok, _ := ov.lookup(unsafe.String(unsafe.SliceData(key), len(key)))
		valid := ok && f.Invalid == ""
		if pr.absent && valid || !pr.absent && (!valid || pr.hint != nil && !admitted(f.Value, pr.hint)) {
			rd.e.stats.Needless++
			return true
		}
	}
	return false
}

// admitted reports whether raw may be one of the hinted strings: false
// only for a plain JSON string (no escapes) that is none of them.
func admitted(raw []byte, hint []string) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return true
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') >= 0 {
		return true
	}
	for _, h := range hint {
		if string(in) == h {
			return true
		}
	}
	return false
}

// appendNamed appends p's key under b to dst, and reports whether b binds
// every variable of it, of those keep admits (nil: any). A closure, as
// Pattern.AppendFormat takes, was an allocation per probe.
func appendNamed(dst []byte, p *rules.Pattern, b *binding, keep func(string) bool) ([]byte, bool) {
	for i, sg := range p.Segs {
		if i > 0 {
			dst = append(dst, '/')
		}
		if sg.Var == "" {
			dst = append(dst, sg.Lit...)
			continue
		}
		x, ok := b.get(sg.Var)
		if !ok || keep != nil && !keep(sg.Var) {
			return dst, false
		}
		dst = append(dst, x.str...)
	}
	return dst, true
}
