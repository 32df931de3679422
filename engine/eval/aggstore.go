package eval

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// The aggregate store keeps aggregate results across rounds. A round's
// aggregate cache (aggadjust.go) is right for the round's reader and its own
// writes; the store keeps, between rounds, the results that are right for
// the reader alone, and drops a result as soon as a change could alter it.
//
// What a result could depend on is what its computation read: every access
// to the reader is recorded (deps) — a Get of a key, a prefix scan, a
// lookup by a variable segment, by value, a scan of a whole type — and a
// changed key drops every result with an access whose domain holds it. A
// lookup by value is dropped by a change from or to that value; when the
// old value is unknown, by any change of a fact of its type. After a
// round, its own writes drop the results they could alter in the same way
// (with every value they held): what is kept holds for the reader, whether
// or not the plan commits.
//
// When every change says what the fact held before it (Change.PrevKnown,
// as the mirror's do) and the batch is small (MaxAdjust), kept results are
// adjusted rather than dropped, as a round adjusts its cache for its own
// writes (roundAggs.changed): each change is taken out of the result under the
// state before it and put in under the state after, on an overlay that
// holds the state before the batch. An adjusted result then depends on
// what it read and what adjusting it read.
//
// The store serves Continue only: the caller promises that the changes it
// passes are every change since the revision of its previous call. Any
// other call (Full, Incremental, Tick) starts it empty.
//
// With it, one instance's health change adjusts the counts of its service
// that read the instance, instead of recounting the service's instances in
// every rule that aggregates over them.

// deps is what one aggregate computation read from the round's reader.
type deps struct {
	gets     []string
	prefixes []string
	segs     []segDep
	vals     []valDep
	types    []*facts.FactType
	tooMany  bool // more accesses than maxDeps: not indexed, so not kept across rounds (but see lookup)
	impure   bool // saw the round's own writes: not right for the reader alone
	// adjusted: the result was adjusted for changes since its computation.
	// Adjusting follows the patterns, so what it lists is not every fact
	// a recomputation would read (a member's fact created before its
	// service fact reads nothing): a batch of changes the store drops
	// results for, rather than adjusting them, drops it whatever it lists.
	adjusted bool
	base     int // the accesses of the computation itself; adjusting adds to them
	// indexed: the store listed the result under every access (index with
	// the result's own deps). Once it is, a list forget deletes is the only
	// way it leaves an index (aggStore.lost).
	indexed bool
	// sharedGets: gets is a list the store shares (aggStore.shareReads):
	// sorted, without repeats, its capacity its length, so that an append
	// copies it. Nothing writes into it; an append clears the flag.
	sharedGets bool
	set        map[depKey]struct{} // the accesses adjusting added (addNew)
	max        int                 // the accesses it may hold (maxDeps, WithMaxKeptReads); 0: maxDeps
}

// depKey is one access, as a set member.
type depKey struct {
	kind byte // 'g' get, 'p' prefix, 's' segment, 'v' value, 't' type
	s    string
	t    *facts.FactType
	seg  int
}

func (d *deps) each(fn func(depKey)) {
	for _, k := range d.gets {
		fn(depKey{kind: 'g', s: k})
	}
	for _, p := range d.prefixes {
		fn(depKey{kind: 'p', s: p})
	}
	for _, sg := range d.segs {
		fn(depKey{kind: 's', s: sg.v, t: sg.t, seg: sg.seg})
	}
	for _, v := range d.vals {
		fn(depKey{kind: 'v', s: v.v, t: v.t})
	}
	for _, t := range d.types {
		fn(depKey{kind: 't', t: t})
	}
}

func (d *deps) add(k depKey) {
	switch k.kind {
	case 'g':
		d.gets, d.sharedGets = append(d.gets, k.s), false
	case 'p':
		d.prefixes = append(d.prefixes, k.s)
	case 's':
		d.segs = append(d.segs, segDep{k.t, k.seg, k.s})
	case 'v':
		d.vals = append(d.vals, valDep{k.t, k.s})
	case 't':
		d.types = append(d.types, k.t)
	}
}

// addNew adds the accesses of o that adjusting d's result has not added
// yet and returns them: a result adjusted for the same facts again and
// again stays its size. (An access of the computation itself may be added
// once more; comparing with those would cost a set of them all.)
func (d *deps) addNew(o *deps) *deps {
	if d.set == nil {
		d.set = map[depKey]struct{}{}
	}
	added := &deps{}
	o.each(func(k depKey) {
		if _, ok := d.set[k]; !ok {
			d.set[k] = struct{}{}
			d.add(k)
			added.add(k)
		}
	})
	return added
}

type valDep struct {
	t *facts.FactType
	v string
}

type segDep struct {
	t   *facts.FactType
	seg int
	v   string
}

// maxDeps bounds, by default (WithMaxKeptReads), the accesses of a result
// the store indexes: a result that read more is kept only when adjusting
// alone can keep it (its reads all facts of its own patterns: lookup),
// else recomputed in every round that needs it.
const maxDeps = 1 << 14

func (d *deps) size() int {
	return len(d.gets) + len(d.prefixes) + len(d.segs) + len(d.vals) + len(d.types)
}

func (d *deps) full() bool {
	if !d.tooMany && d.size() >= cmp.Or(d.max, maxDeps) {
		d.tooMany = true
	}
	return d.tooMany
}

func (d *deps) get(key string) {
	if !d.full() {
		d.gets, d.sharedGets = append(d.gets, key), false
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

func (d *deps) value(t *facts.FactType, v string) {
	if !d.full() {
		d.vals = append(d.vals, valDep{t, v})
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
	d.impure = d.impure || o.impure
	d.gets, d.sharedGets = append(d.gets, o.gets...), false
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

// pristine is a cached result as it was before the round's own writes
// first adjusted it, when it was right for the round's reader alone.
type pristine struct {
	ag *rules.Aggregate
	gk string
	e  aggEntry
}

// aggStore is the evaluator's aggregate results between rounds, indexed by
// the accesses they depend on.
type aggStore struct {
	rev    int64 // the reader revision the results hold for; -1: none
	groups map[*rules.Aggregate]map[string]aggEntry
	gets   map[string][]*aggRef
	pres   map[string][]*aggRef
	segs   map[segDep][]*aggRef
	vals   map[valDep][]*aggRef          // by type and value
	valsT  map[*facts.FactType][]*aggRef // the same, by type: for a change whose old value is unknown
	types  map[*facts.FactType][]*aggRef
	// partial lists the cached groups of an aggregate by the values of the
	// group variables its members name (aggInfo.named), for members that
	// do not name them all; stale names are skipped.
	partial map[*rules.Aggregate]map[string][]string
	refs    int // index entries, stale ones included
	limit   int // refs at which the indexes are rebuilt without stale entries
	least   int // the least limit: 4 x maxDeps (WithMaxKeptReads)
	// lost, while keep forgets a round's writes, is the index lists forget
	// deleted (lostT: the lists by type of valsT): a result restored as it
	// was before the round is listed again under those alone.
	lost  map[depKey]struct{}
	lostT map[*facts.FactType]struct{}
	// whole is the aggregates whose every group with a member is held,
	// right for the reader at rev (aggwhole.go): a group not held has none.
	// Their groups have no deps and are in no index: only adjusting keeps
	// them, so anything that drops results instead drops these whole.
	//
	// Each maps to what computing it for the reader cost (the facts it
	// visited, at least 1): adjusting it for a large batch is weighed
	// against that (wholeWorthAdjusting).
	whole map[*rules.Aggregate]int64
	parts []string // the key forget drops results for, split (scratch)
	// lists is the read lists kept results share (shareReads), by hash
	// of their keys. A list outlives its last result until the indexes
	// are next rebuilt (compact): like the stale index entries, at most
	// about as many keys as the kept results list.
	lists map[uint64][][]string
	seed  maphash.Seed
}

func newAggStore() *aggStore {
	s := &aggStore{rev: -1, seed: maphash.MakeSeed(), least: 4 * maxDeps}
	s.reset(-1)
	return s
}

// reset empties the store; it then holds for revision rev.
func (s *aggStore) reset(rev int64) {
	s.rev = rev
	s.groups = map[*rules.Aggregate]map[string]aggEntry{}
	s.partial = map[*rules.Aggregate]map[string][]string{}
	s.gets = map[string][]*aggRef{}
	s.pres = map[string][]*aggRef{}
	s.segs = map[segDep][]*aggRef{}
	s.vals = map[valDep][]*aggRef{}
	s.valsT = map[*facts.FactType][]*aggRef{}
	s.types = map[*facts.FactType][]*aggRef{}
	s.whole = map[*rules.Aggregate]int64{}
	s.lists = map[uint64][][]string{}
	s.refs, s.limit = 0, s.least
}

// shareReads makes the keys d's computation read a list the store shares
// with every kept result that read the same keys: sorted, each once, and
// clipped so that adjusting (addNew) copies it before adding to it.
// Results of different aggregates over the same facts read the same keys
// (a service's count of running instances and its count of healthy ones;
// a nested aggregate's reads are merged into its parent's): at medium,
// 1,504 kept results held 754,371 keys read, 583,579 of them once per
// result, in 410 distinct sets.
func (s *aggStore) shareReads(d *deps) {
	if d.sharedGets || len(d.gets) == 0 {
		return
	}
	slices.Sort(d.gets)
	gets := slices.Compact(d.gets)
	h := s.hashKeys(gets)
	for _, l := range s.lists[h] {
		if slices.Equal(l, gets) {
			d.gets, d.sharedGets = l, true
			return
		}
	}
	l := slices.Clip(slices.Clone(gets)) // the recorded list's spare capacity goes
	s.lists[h] = append(s.lists[h], l)
	d.gets, d.sharedGets = l, true
}

// share lists d's keys as a list others may share, when it is one.
func (s *aggStore) share(d *deps) {
	if !d.sharedGets || len(d.gets) != cap(d.gets) {
		return
	}
	h := s.hashKeys(d.gets)
	for _, l := range s.lists[h] {
		if slices.Equal(l, d.gets) {
			return
		}
	}
	s.lists[h] = append(s.lists[h], d.gets)
}

func (s *aggStore) hashKeys(keys []string) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	for _, k := range keys {
		h.WriteString(k)
		h.WriteByte(0) // no key holds a NUL: ["a", "b"] and ["ab"] differ
	}
	return h.Sum64()
}

// index lists a result under every access d holds: its own, or what
// adjusting it read (r.d then holds them too).
func (s *aggStore) index(ref aggRef, d *deps) {
	r := &ref // one handle for every list: an entry costs a pointer
	for _, k := range d.gets {
		s.gets[k] = append(s.gets[k], r)
	}
	for _, p := range d.prefixes {
		s.pres[p] = append(s.pres[p], r)
	}
	for _, sg := range d.segs {
		s.segs[sg] = append(s.segs[sg], r)
	}
	for _, v := range d.vals {
		s.vals[v] = append(s.vals[v], r)
		s.valsT[v.t] = append(s.valsT[v.t], r)
	}
	for _, t := range d.types {
		s.types[t] = append(s.types[t], r)
	}
	s.refs += d.size()
	if d == ref.d {
		d.indexed = true
	}
}

// relist lists an indexed result again under the index lists keep's
// forgetting deleted: the lists it still holds name it already.
func (s *aggStore) relist(ref aggRef) {
	r, d := &ref, ref.d
	for _, k := range d.gets {
		if _, ok := s.lost[depKey{kind: 'g', s: k}]; ok {
			s.gets[k] = append(s.gets[k], r)
			s.refs++
		}
	}
	for _, p := range d.prefixes {
		if _, ok := s.lost[depKey{kind: 'p', s: p}]; ok {
			s.pres[p] = append(s.pres[p], r)
			s.refs++
		}
	}
	for _, sg := range d.segs {
		if _, ok := s.lost[depKey{kind: 's', s: sg.v, t: sg.t, seg: sg.seg}]; ok {
			s.segs[sg] = append(s.segs[sg], r)
			s.refs++
		}
	}
	for _, v := range d.vals {
		if _, ok := s.lost[depKey{kind: 'v', s: v.v, t: v.t}]; ok {
			s.vals[v] = append(s.vals[v], r)
			s.refs++
		}
		if _, ok := s.lostT[v.t]; ok {
			s.valsT[v.t] = append(s.valsT[v.t], r)
		}
	}
	for _, t := range d.types {
		if _, ok := s.lost[depKey{kind: 't', t: t}]; ok {
			s.types[t] = append(s.types[t], r)
			s.refs++
		}
	}
}

// lose records, while keep forgets, that an index list was deleted.
func (s *aggStore) lose(k depKey) {
	if s.lost != nil {
		s.lost[k] = struct{}{}
	}
}

func (s *aggStore) drop(refs []*aggRef) {
	for _, r := range refs {
		if e, ok := s.groups[r.ag][r.gk]; ok && e.deps == r.d {
			delete(s.groups[r.ag], r.gk)
		}
	}
}

// forget drops every result whose computation could have seen key change:
// values are the string values the fact held and holds (when known: a
// lookup by any other value did not see it), or nil when some are unknown.
func (s *aggStore) forget(schema *facts.Schema, key string, values []string) {
	if refs, ok := s.gets[key]; ok {
		s.drop(refs)
		delete(s.gets, key)
		s.lose(depKey{kind: 'g', s: key})
	}
	for i := 0; i < len(key); i++ {
		if key[i] != '/' {
			continue
		}
		if refs, ok := s.pres[key[:i+1]]; ok {
			s.drop(refs)
			delete(s.pres, key[:i+1])
			s.lose(depKey{kind: 'p', s: key[:i+1]})
		}
	}
	kt, err := schema.KeyType(key)
	if err != nil {
		return
	}
	t := kt
	if values == nil {
		if refs, ok := s.valsT[t]; ok {
			s.drop(refs)
			delete(s.valsT, t)
			if s.lostT != nil {
				s.lostT[t] = struct{}{}
			}
		}
	}
	for _, v := range values {
		vd := valDep{t, v}
		if refs, ok := s.vals[vd]; ok {
			s.drop(refs)
			delete(s.vals, vd)
			s.lose(depKey{kind: 'v', s: v, t: t})
		}
	}
	if refs, ok := s.types[t]; ok {
		s.drop(refs)
		delete(s.types, t)
		s.lose(depKey{kind: 't', t: t})
	}
	s.parts = facts.SplitKey(s.parts[:0], key)
	for i, part := range s.parts {
		sg := segDep{t, i, part}
		if refs, ok := s.segs[sg]; ok {
			s.drop(refs)
			delete(s.segs, sg)
			s.lose(depKey{kind: 's', s: part, t: t, seg: i})
		}
	}
}

// keep ends a round: results the round computed are indexed, those its own
// writes could alter are dropped (those it adjusted for them first), and
// the store holds for revision rev. The indexes are rebuilt when mostly
// stale.
func (s *aggStore) keep(schema *facts.Schema, rev int64, computed, adjusted []aggRef, written []written, pristine []pristine) {
	for _, r := range computed {
		if e, ok := s.groups[r.ag][r.gk]; ok && e.deps == r.d {
			if r.d.tooMany {
				delete(s.groups[r.ag], r.gk)
				continue
			}
			s.shareReads(r.d)
			r.d.base = r.d.size()
			s.index(r, r.d)
		}
	}
	for _, r := range adjusted {
		if e, ok := s.groups[r.ag][r.gk]; ok && e.deps == nil {
			delete(s.groups[r.ag], r.gk)
		}
	}
	s.lost, s.lostT = map[depKey]struct{}{}, map[*facts.FactType]struct{}{}
	for _, w := range written {
		s.forget(schema, w.key, w.values)
	}
	// What the round's writes changed, as it was before them: right for
	// the reader, and adjusted for those writes when they come back as
	// changes (a batch of agents' reports and the engine's own writes touch
	// every service's counts each round; dropped, they were recounted in
	// every round).
	for _, p := range pristine {
		gs := s.groups[p.ag]
		if gs == nil {
			gs = map[string]aggEntry{}
			s.groups[p.ag] = gs
		}
		if p.e.deps == nil { // a kept whole aggregate's group: in no index
			gs[p.gk] = p.e
			continue
		}
		if p.e.deps.base == 0 {
			s.shareReads(p.e.deps)
			p.e.deps.base = p.e.deps.size()
		}
		gs[p.gk] = p.e
		if ref := (aggRef{p.ag, p.gk, p.e.deps}); p.e.deps.indexed {
			s.relist(ref) // restored, it is valid again wherever it is still listed
		} else {
			s.index(ref, p.e.deps) // computed in this round
		}
	}
	s.lost, s.lostT = nil, nil
	s.rev = rev
	if s.refs > s.limit {
		s.compact()
	}
}

// dropAdjusted drops every result adjusted since its computation
// (deps.adjusted), but those of whole aggregates.
func (s *aggStore) dropAdjusted() {
	for ag, gs := range s.groups {
		if _, ok := s.whole[ag]; ok {
			continue
		}
		for gk, e := range gs {
			if e.deps == nil || e.deps.adjusted {
				delete(gs, gk)
			}
		}
	}
}

// notWhole drops a whole aggregate's groups: it lost one, so a group not
// held may have members, and the others are in no index.
func (s *aggStore) notWhole(ag *rules.Aggregate) {
	delete(s.whole, ag)
	delete(s.groups, ag)
}

// wholeEnd records what a round (or an advance) learnt of the store's whole
// aggregates: those it found not whole any more are dropped. It returns
// those the round computed whole, for the store to compute again for the
// reader alone (aggregates.keepWhole).
func (s *aggStore) wholeEnd(whole map[*rules.Aggregate]*wholeState) []*rules.Aggregate {
	var fresh []*rules.Aggregate
	for ag, w := range whole {
		switch {
		case w.kept && !w.whole:
			s.notWhole(ag)
		case !w.kept && w.tried && w.whole:
			fresh = append(fresh, ag)
		}
	}
	return fresh
}

// compact rebuilds the indexes from the results kept.
func (s *aggStore) compact() {
	groups, partial, whole, rev := s.groups, s.partial, s.whole, s.rev
	s.reset(rev)
	s.groups, s.partial, s.whole = groups, partial, whole
	for ag, gs := range groups {
		for gk, e := range gs {
			if e.deps != nil {
				s.index(aggRef{ag, gk, e.deps}, e.deps)
				s.share(e.deps)
			}
		}
	}
	s.limit = max(s.least, 2*s.refs)
}

// MaxAdjust is by default (WithMaxAdjust) the largest batch of changes the
// store adjusts its results for, in a cluster of fewer than 8 x MaxAdjust
// facts (adjustLimit); a larger one drops the results it could
// alter instead: adjusting costs a join per change and aggregate,
// recomputing once per group and round, and only for the groups a round
// asks for (BENCHMARKS.md, "Evaluator constants").
const MaxAdjust = 4096

func prevKnown(changes []facts.Change) bool {
	for _, c := range changes {
		if !c.PrevKnown {
			return false
		}
	}
	return true
}

// allValid reports whether no change is to or from a fact that breaks the
// schema: adjusting kept results goes by values alone, so a batch with one
// drops the results it could alter instead. A leased fact's validity is not
// its value's alone (it needs an etcd lease): its changes, rare, always drop.
func allValid(schema *facts.Schema, r facts.Reader, changes []facts.Change) bool {
	for _, c := range changes {
		kt, err := schema.KeyType(c.Key)
		if err != nil || kt.Leased {
			return false
		}
		if f, ok := r.Get(c.Key); ok && f.Invalid != "" {
			return false
		}
		if c.Prev != nil && kt.Name != "event" {
			if _, err := kt.Value.Decode(c.Prev); err != nil {
				return false
			}
		}
	}
	return true
}

// advance adjusts the kept results for a batch of changes, from the
// store's revision to r's (the round's end records it: aggStore.keep):
// those of every aggregate, or of the aggregates only holds. It goes in
// two passes, as a recomputation would see the batch: every member a
// changed fact is part of leaves its group under the values before the
// batch, then every member a changed fact is part of joins under the
// values after it, each member once a pass however many of its facts
// changed (an instance's first report changes seven; roundAggs.seen).
func (a *aggregates) advance(r facts.Reader, changes []facts.Change, only, except map[*rules.Aggregate]bool) {
	rd := a.e.newRound(r, nil)
	ra := rd.aggs
	ra.only, ra.except = only, except
	rd.ov.committed = true
	keys := make([]string, 0, len(changes)) // each changed key once, in the order first changed
	for _, c := range changes {
		if _, set := rd.ov.w[c.Key]; !set { // a key changed twice held the first change's Prev
			rd.ov.set(facts.Fact{Key: c.Key, Value: c.Prev})
			keys = append(keys, c.Key)
		}
	}
	var touched []aggRef
	ra.touched = &touched
	ra.seen = map[string]struct{}{}
	pass := func(sign int) {
		clear(ra.seen)
		for _, k := range keys {
			touched = touched[:0]
			ra.changed(k, rd.ov.w[k].f.Value, sign)
			a.noteTouched(touched)
		}
	}
	pass(-1)
	for _, c := range changes {
		after := c.Fact
		if c.Deleted {
			after.Value = nil
		}
		rd.ov.set(after)
	}
	pass(+1)
	// An aggregate computed whole while adjusting (one a where reads) holds
	// groups in no index, right only for that moment: dropped.
	for _, ag := range a.store.wholeEnd(ra.whole) {
		a.store.notWhole(ag)
	}
}

// noteTouched marks the results a change adjusted; t.d holds what adjusting
// read, which joins what their computation read.
func (a *aggregates) noteTouched(touched []aggRef) {
	for _, t := range touched {
		en, ok := a.store.groups[t.ag][t.gk]
		if !ok || en.deps == nil || en.deps.tooMany {
			continue
		}
		// A result adjusted for so many different facts that what
		// adjusting read outgrows what computing it read is dropped:
		// computing it again starts afresh.
		en.deps.adjusted = true
		if t.d == nil {
			continue // nothing recorded: see maintainSite
		}
		added := en.deps.addNew(t.d)
		if en.deps.size() > 4*en.deps.base+1024 {
			delete(a.store.groups[t.ag], t.gk)
			continue
		}
		a.store.index(aggRef{t.ag, t.gk, en.deps}, added)
	}
}

// wholeWorthAdjusting returns the store's whole aggregates that a batch of
// changes costs less to adjust than to compute again, and drops the others:
// adjusting joins each change of the aggregate's fact types with its other
// patterns, twice (out under the values before, in under those after);
// computing it again visits the facts its last computation visited, and as
// many again at the end of the round that computes it (keepWhole). It
// returns the changes of the kept aggregates' fact types too: adjusting an
// aggregate joins the facts of its own patterns alone, so the others
// neither adjust it nor are read while it is adjusted (unless it has
// aggregates of its own, which read what they read).
func (a *aggregates) wholeWorthAdjusting(changes []facts.Change) (map[*rules.Aggregate]bool, []facts.Change) {
	types := make([]*facts.FactType, len(changes))
	byType := map[*facts.FactType]int{}
	for i, c := range changes {
		if kt, err := a.e.rs.Schema.KeyType(c.Key); err == nil {
			types[i] = kt
			byType[kt]++
		}
	}
	keep := map[*rules.Aggregate]bool{}
	read := map[*facts.FactType]bool{}
	nested := false
	for ag, cost := range a.store.whole {
		n := 0
		own := map[*facts.FactType]bool{}
		for _, p := range ag.Body.Match {
			if !own[p.Type] {
				own[p.Type] = true
				n += byType[p.Type]
			}
		}
		if int64(n) > wholeAdjustFactor*cost {
			a.store.notWhole(ag)
			continue
		}
		keep[ag] = true
		nested = nested || len(ag.Body.Aggregates) > 0
		for t := range own {
			read[t] = true
		}
	}
	if nested {
		return keep, changes
	}
	var out []facts.Change
	for i, c := range changes {
		if read[types[i]] {
			out = append(out, c)
		}
	}
	return keep, out
}

// wholeAdjustFactor: a whole aggregate is adjusted for a batch of up to
// this many changes of its fact types per fact its computation visited:
// past it, computing the aggregate again (twice: in the round, then for
// the reader) costs less than adjusting it. Engine alone at medium,
// adjusting a change cost about a fifth of what computing spent per fact
// visited (BENCHMARKS.md, "Evaluator constants").
const wholeAdjustFactor = 8

// listPartial lists a cached group under the values its members name.
func (s *aggStore) listPartial(ag *rules.Aggregate, info *aggInfo, gk string, outer []outerVal) {
	pk := partialKey(info, func(i int) string { return outer[i].v.str })
	m := s.partial[ag]
	if m == nil {
		m = map[string][]string{}
		s.partial[ag] = m
	}
	list := m[pk][:0:0]
	for _, g := range m[pk] { // drop the names of groups no longer cached
		if _, ok := s.groups[ag][g]; ok && g != gk {
			list = append(list, g)
		}
	}
	m[pk] = append(list, gk)
}

// written is a key a round wrote and every string value it held: before
// the round, and each the round gave it.
type written struct {
	key    string
	values []string
}

// changedValues returns what forget needs to know of a change's values:
// nil when its old value is unknown.
func changedValues(c facts.Change) []string {
	if !c.PrevKnown {
		return nil
	}
	out := make([]string, 0, 2)
	if v, ok := facts.StringValue(c.Prev); ok {
		out = append(out, v)
	}
	if v, ok := facts.StringValue(c.Value); ok && !c.Deleted {
		out = append(out, v)
	}
	return out
}
