package eval

import (
	"slices"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// A choice's candidate lists (candidates.go) are kept from one round to the
// next while no fact of a type their scope's patterns read changes: solved
// again in every round, the scheduler's list of 5,000 nodes was 3.9 of the
// large preset's 141 CPU s at 1,000 firings a round, and 7.5 s at 500
// (BENCHMARKS.md). Continue is told every change between two views, so a
// list solved on the last view holds on the next one unless a change is of
// one of those types; any other entry point, and a plan that did not
// commit, drops them all. A list that read a write not committed (laid over
// the view, or the round's own) is not kept: its revision is not one a
// guard could compare.

// candKeep is the candidate lists kept across rounds.
type candKeep struct {
	rev    int64 // the revision of the view the lists were solved on
	scopes map[*rules.Scope]*keptScope
}

// keptScope is one scope's kept lists, by its outer values (candidates).
type keptScope struct {
	prefixes []string // what precedes the first variable of each pattern's template
	types    map[*facts.FactType]bool
	lists    map[string][]candSol
}

// maxKeptLists bounds the lists kept of one scope: one for each set of
// outer values a round solved it under.
const maxKeptLists = 64

func (k *candKeep) reset() { k.scopes = nil }

// follow brings the lists from the view at revision from to the next,
// dropping those of a scope a change may alter.
func (k *candKeep) follow(from int64, s *facts.Schema, changes []facts.Change) {
	if len(k.scopes) == 0 {
		return
	}
	if from != k.rev { // another view between, or none (from -1)
		k.scopes = nil
		return
	}
	for _, c := range changes {
		var kt *facts.FactType
		typed := false
		for sc, ks := range k.scopes {
			if !hasAnyPrefix(c.Key, ks.prefixes) {
				continue
			}
			if !typed {
				kt, _ = s.KeyType(c.Key)
				typed = true
			}
			if kt == nil || ks.types[kt] {
				delete(k.scopes, sc)
			}
		}
		if len(k.scopes) == 0 {
			return
		}
	}
}

func hasAnyPrefix(key string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// get returns the list of sc under key kept from an earlier round.
func (k *candKeep) get(sc *rules.Scope, key string) ([]candSol, bool) {
	ks := k.scopes[sc]
	if ks == nil {
		return nil, false
	}
	sols, ok := ks.lists[key]
	return sols, ok
}

// put keeps a list solved on this round's view, unless one of its reads
// is of a write that has not committed.
func (k *candKeep) put(sc *rules.Scope, key string, sols []candSol) {
	for _, s := range sols {
		for _, r := range s.reads {
			if r.Own || r.Rev == facts.Uncommitted {
				return
			}
		}
	}
	ks := k.scopes[sc]
	if ks == nil || len(ks.lists) >= maxKeptLists {
		ks = newKeptScope(sc)
		if k.scopes == nil {
			k.scopes = map[*rules.Scope]*keptScope{}
		}
		k.scopes[sc] = ks
	}
	kept := make([]candSol, len(sols))
	for i, s := range sols {
		kept[i] = candSol{names: slices.Clone(s.names), vals: slices.Clone(s.vals), reads: slices.Clone(s.reads), order: s.order}
	}
	ks.lists[key] = kept
}

func newKeptScope(sc *rules.Scope) *keptScope {
	ks := &keptScope{types: map[*facts.FactType]bool{}, lists: map[string][]candSol{}}
	for _, ps := range [][]*rules.Pattern{sc.Match, sc.Optional, sc.Absent} {
		for _, p := range ps {
			pre, _, _ := strings.Cut(p.Template, "{")
			ks.prefixes = append(ks.prefixes, pre)
			ks.types[p.Type] = true
		}
	}
	return ks
}
