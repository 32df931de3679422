package eval

import (
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// The aggregate store keeps aggregate results across rounds. A round's
// aggregate cache (aggcache.go) is right for the round's reader and its own
// writes; the store keeps, between rounds, the results that are right for
// the reader alone, and drops a result as soon as a change could alter it.
//
// What a result could depend on is what its computation read: every access
// to the reader is recorded (deps) — a Get of a key, a prefix scan, a
// lookup by a variable segment, by value, a scan of a whole type — and a
// changed key drops every result with an access whose domain holds it. A
// lookup by value would need the key's previous value to be exact; any
// change of a fact of that type drops it instead. After a round, its own
// writes drop the results they could alter in the same way: what is kept
// holds for the reader, whether or not the plan commits.
//
// The store serves Continue only: the caller promises that the changes it
// passes are every change since the revision of its previous call. Any
// other call (Full, Incremental, Tick) at another revision starts it empty.
//
// With it, one instance's health change recomputes the aggregates of the
// instance's service that read the instance, not every aggregate over the
// service's instances in every rule that reads them.

// deps is what one aggregate computation read from the round's reader.
type deps struct {
	gets     []string
	prefixes []string
	segs     []segDep
	vals     []*facts.FactType
	types    []*facts.FactType
	tooMany  bool // more accesses than maxDeps: not kept across rounds
}

type segDep struct {
	t   *facts.FactType
	seg int
	v   string
}

// maxDeps bounds the accesses of a result the store keeps: a result that
// read more is recomputed in every round that needs it.
const maxDeps = 1 << 14

func (d *deps) size() int {
	return len(d.gets) + len(d.prefixes) + len(d.segs) + len(d.vals) + len(d.types)
}

func (d *deps) full() bool {
	if !d.tooMany && d.size() >= maxDeps {
		d.tooMany = true
	}
	return d.tooMany
}

func (d *deps) get(key string) {
	if !d.full() {
		d.gets = append(d.gets, key)
	}
}

func (d *deps) prefix(p string) {
	if !strings.HasSuffix(p, "/") {
		d.tooMany = true // the store finds prefixes at segment boundaries only
		return
	}
	if !d.full() {
		d.prefixes = append(d.prefixes, p)
	}
}

func (d *deps) seg(t *facts.FactType, seg int, v string) {
	if !d.full() {
		d.segs = append(d.segs, segDep{t, seg, v})
	}
}

func (d *deps) value(t *facts.FactType) {
	if !d.full() {
		d.vals = append(d.vals, t)
	}
}

func (d *deps) ofType(t *facts.FactType) {
	if !d.full() {
		d.types = append(d.types, t)
	}
}

// merge adds what o read: a cached result used while computing another.
func (d *deps) merge(o *deps) {
	if o == nil || o.tooMany {
		d.tooMany = true
		return
	}
	d.gets = append(d.gets, o.gets...)
	d.prefixes = append(d.prefixes, o.prefixes...)
	d.segs = append(d.segs, o.segs...)
	d.vals = append(d.vals, o.vals...)
	d.types = append(d.types, o.types...)
	d.full()
}

// aggRef names a stored result by what it was computed from; it is stale
// once the group holds another result (or none).
type aggRef struct {
	ag *rules.Aggregate
	gk string
	d  *deps
}

// aggStore is the evaluator's aggregate results between rounds, indexed by
// the accesses they depend on.
type aggStore struct {
	rev    int64 // the reader revision the results hold for; -1: none
	groups map[*rules.Aggregate]map[string]aggEntry
	gets   map[string][]aggRef
	pres   map[string][]aggRef
	segs   map[segDep][]aggRef
	vals   map[*facts.FactType][]aggRef
	types  map[*facts.FactType][]aggRef
	refs   int // index entries, stale ones included
}

func newAggStore() *aggStore {
	s := &aggStore{rev: -1}
	s.reset(-1)
	return s
}

// reset empties the store; it then holds for revision rev.
func (s *aggStore) reset(rev int64) {
	s.rev = rev
	s.groups = map[*rules.Aggregate]map[string]aggEntry{}
	s.gets = map[string][]aggRef{}
	s.pres = map[string][]aggRef{}
	s.segs = map[segDep][]aggRef{}
	s.vals = map[*facts.FactType][]aggRef{}
	s.types = map[*facts.FactType][]aggRef{}
	s.refs = 0
}

// index lists a result computed in a round under every access it read.
func (s *aggStore) index(r aggRef) {
	d := r.d
	for _, k := range d.gets {
		s.gets[k] = append(s.gets[k], r)
	}
	for _, p := range d.prefixes {
		s.pres[p] = append(s.pres[p], r)
	}
	for _, sg := range d.segs {
		s.segs[sg] = append(s.segs[sg], r)
	}
	for _, t := range d.vals {
		s.vals[t] = append(s.vals[t], r)
	}
	for _, t := range d.types {
		s.types[t] = append(s.types[t], r)
	}
	s.refs += d.size()
}

func (s *aggStore) drop(refs []aggRef) {
	for _, r := range refs {
		if e, ok := s.groups[r.ag][r.gk]; ok && e.deps == r.d {
			delete(s.groups[r.ag], r.gk)
		}
	}
}

// forget drops every result whose computation could have seen key change.
func (s *aggStore) forget(schema *facts.Schema, key string) {
	if refs, ok := s.gets[key]; ok {
		s.drop(refs)
		delete(s.gets, key)
	}
	for i := 0; i < len(key); i++ {
		if key[i] != '/' {
			continue
		}
		if refs, ok := s.pres[key[:i+1]]; ok {
			s.drop(refs)
			delete(s.pres, key[:i+1])
		}
	}
	k, err := schema.Parse(key)
	if err != nil {
		return
	}
	t := k.Type
	if refs, ok := s.vals[t]; ok {
		s.drop(refs)
		delete(s.vals, t)
	}
	if refs, ok := s.types[t]; ok {
		s.drop(refs)
		delete(s.types, t)
	}
	for i, part := range strings.Split(key, "/") {
		sg := segDep{t, i, part}
		if refs, ok := s.segs[sg]; ok {
			s.drop(refs)
			delete(s.segs, sg)
		}
	}
}

// keep ends a round: results the round computed are indexed, those its own
// writes could alter are dropped, and the store holds for revision rev.
// The indexes are rebuilt when mostly stale.
func (s *aggStore) keep(schema *facts.Schema, rev int64, computed []aggRef, written []string) {
	for _, r := range computed {
		if e, ok := s.groups[r.ag][r.gk]; ok && e.deps == r.d {
			s.index(r)
		}
	}
	for _, k := range written {
		s.forget(schema, k)
	}
	// Results maintained through the round's writes without their own
	// computation (nothing indexes them) go too.
	for ag, gs := range s.groups {
		for gk, e := range gs {
			if e.deps == nil || e.deps.tooMany {
				delete(gs, gk)
			}
		}
		if len(gs) == 0 {
			delete(s.groups, ag)
		}
	}
	s.rev = rev
	live := 0
	for _, gs := range s.groups {
		for _, e := range gs {
			live += e.deps.size()
		}
	}
	if s.refs > 4*live+4096 {
		groups := s.groups
		s.reset(rev)
		s.groups = groups
		for ag, gs := range groups {
			for gk, e := range gs {
				s.index(aggRef{ag, gk, e.deps})
			}
		}
	}
}
