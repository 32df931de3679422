package eval

import (
	"cel.dev/cel-go/common/types"
	"github.com/ccattler/ccattler/rules"
)

// MaxGuardedReads bounds, by default (WithMaxGuardedReads), the member facts
// of a rule's guarded aggregates that its firings carry as guarded reads:
// each is a compare in the firing's transaction, and an etcd transaction
// holds a bounded number of them (128 by default for an external etcd).
// Past it, a firing is ordered after the whole plan instead (Firing.AfterAll).
const MaxGuardedReads = 64

// WithMaxGuardedReads sets MaxGuardedReads.
func WithMaxGuardedReads(n int) Option { return func(e *Evaluator) { e.maxGuarded = n } }

// guard is what a binding's firings carry for the guarded aggregates it read.
type guard struct {
	reads   []Read
	barrier bool
}

// guardOf computes the guard of s, a binding of r whose guard held: the
// member facts of each of r's guarded aggregates, as ordinary reads, so
// that a firing decided on the count commits only if every fact it counted
// is unchanged (compared at commit) and every write of the round it counted
// committed (Own: ordered). A stop decided on a count is then never
// committed on a count that no longer holds. A group is computed again for
// this, not taken from the aggregate caches, which list at most
// MaxAggregateReads members; this happens only for bindings that fire.
// With more member facts than the limit, the firing is ordered after its
// whole plan instead: a write of the round that failed stops it, while a
// member's change reported between evaluation and commit is not caught,
// like one reported just after the commit, and the next round corrects.
func (rd *round) guardOf(r *rules.Rule, s *sol) (guard, error) {
	var g guard
	if !guarded(r) {
		return g, nil
	}
	parent := rd.ov.rec
	rd.ov.rec = nil // not a dependency of any kept aggregate
	defer func() { rd.ov.rec = parent }()
	for _, ag := range r.Body.Aggregates {
		if !r.Guarded(ag) || g.barrier {
			continue
		}
		if v, ok := s.b.get(ag.Name); ok && ag.Func == "count" {
			if n, ok := v.celOf().(types.Int); ok && int(n) > rd.e.maxGuarded {
				g.barrier = true // at least a fact per member: over the limit
				continue
			}
		}
		for _, m := range rd.solve(ag.Body, s.b, nil) {
			if ag.Where != nil {
				ok, err := rd.evalBool(ag.Where, m.b, what{"aggregate", ag.Name, " where"})
				if err != nil {
					return guard{}, err
				}
				if !ok {
					continue
				}
			}
			g.reads = append(g.reads, m.reads...)
			if len(g.reads) > rd.e.maxGuarded {
				g.barrier = true
				break
			}
		}
	}
	if g.barrier {
		g.reads = nil
	}
	return g, nil
}

// guarded reports whether one of r's aggregates is guarded.
func guarded(r *rules.Rule) bool {
	for _, ag := range r.Body.Aggregates {
		if r.Guarded(ag) {
			return true
		}
	}
	return false
}
