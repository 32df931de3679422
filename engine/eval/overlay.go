package eval

import (
	"strings"
	"unsafe"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
	"github.com/google/btree"
)

// overlay is the round's writes over the reader: read-your-writes. A later
// firing in the round sees earlier firings' writes; a fact read from here is
// marked Own in the plan (it has no etcd revision yet).
//
// A round may write hundreds of thousands of keys (placing every instance
// of a large apply), and every join looks here too, so the writes are
// indexed like the reader's facts: in key order for prefixes, by type, by
// variable segment and by short string value. Entries are never removed
// (a delete marks them), so each index is append-only and visits its
// entries in the order they were first written: deterministic.
type overlay struct {
	base    *facts.Table // concrete, so that the visitors passed down need not escape to the heap
	schema  *facts.Schema
	w       map[string]*ovEntry            // written keys; deleted ones too
	keys    *btree.BTreeG[*ovEntry]        // the same, in key order
	byType  map[*facts.FactType][]*ovEntry // puts and deletes, by type
	bySeg   map[ovSegKey][]*ovEntry        // by a segment of the key
	byVal   map[ovValKey][]*ovEntry        // by every short string value the entry has held
	version int                            // bumped on every write
	writes  map[*facts.FactType]int        // writes by type, for caches that depend on some types only
	rec     *deps                          // when set, records every access to base (aggstore.go)
	// committed marks an overlay whose entries are committed facts, with
	// their revisions, not the round's writes: the aggregate store's
	// overlay of the state before a batch of changes (aggstore.go).
	committed bool
	buf       []byte   // the key getPattern looks up
	parts     []string // the key indexVars splits (scratch)
	// absent holds the keys getPattern found nowhere, interned, so that
	// reading one again does not copy it (maxAbsentKeys at most): a
	// choice reads the same absent facts of a candidate for
	// every binding it places (a node's architecture, its network), and
	// copying the key for each read was a tenth of what a converging
	// round allocated. A write of one is in w, which is looked in first.
	absent    map[string]string
	maxAbsent int // how many absent keys it interns at most (maxAbsentKeys, WithMaxAbsentKeys)
}

// maxAbsentKeys bounds, by default (WithMaxAbsentKeys), the absent keys an
// overlay interns: past it, a key found nowhere is copied for each read,
// as before.
const maxAbsentKeys = 1 << 16

type ovEntry struct {
	f       facts.Fact
	deleted bool
	typ     *facts.FactType
	vals    []string // the string values under which byVal lists it
}

type ovSegKey struct {
	t   *facts.FactType
	seg int
	v   string
}

type ovValKey struct {
	t *facts.FactType
	v string
}

func newOverlay(r facts.Reader, schema *facts.Schema) *overlay {
	return &overlay{base: tableOf(r, schema), schema: schema, w: map[string]*ovEntry{},
		keys:   btree.NewG(32, func(a, b *ovEntry) bool { return a.f.Key < b.f.Key }),
		byType: map[*facts.FactType][]*ovEntry{}, bySeg: map[ovSegKey][]*ovEntry{}, byVal: map[ovValKey][]*ovEntry{},
		writes: map[*facts.FactType]int{}, maxAbsent: maxAbsentKeys}
}

// tableOf returns the table r is, or a copy of r's facts in one.
func tableOf(r facts.Reader, schema *facts.Schema) *facts.Table {
	if t, ok := r.(*facts.Table); ok {
		return t
	}
	t := facts.NewTable(schema)
	r.Prefix("", func(f facts.Fact) bool {
		t.Put(f)
		return true
	})
	t.SetRev(r.Rev())
	return t
}

// put records a write (value nil: a delete).
func (o *overlay) put(key string, value []byte) {
	o.set(facts.Fact{Key: key, Value: value})
}

// set records f (Value nil: absent), revisions included.
func (o *overlay) set(f facts.Fact) {
	key, value := f.Key, f.Value
	o.version++
	e, ok := o.w[key]
	if ok {
		e.f, e.deleted = f, value == nil
	} else {
		e = &ovEntry{f: f, deleted: value == nil}
		if kt, err := o.schema.KeyType(key); err == nil {
			e.typ = kt
			o.byType[e.typ] = append(o.byType[e.typ], e)
			o.indexVars(e)
		}
		o.w[key] = e
		o.keys.ReplaceOrInsert(e)
	}
	if e.typ != nil {
		o.writes[e.typ]++
	}
	if e.typ == nil || value == nil {
		return
	}
	if v, ok := facts.StringValue(value); ok {
		for _, have := range e.vals {
			if have == v {
				return
			}
		}
		e.vals = append(e.vals, v)
		vk := ovValKey{e.typ, v}
		o.byVal[vk] = append(o.byVal[vk], e)
	}
}

// indexVars lists e under the value of each of its type's variables after
// the first, the ones byVar looks up (the first is a prefix, as in the
// base). Every segment was listed once, the literal ones too, each the
// whole type again: a list per segment grown by every write of the type,
// two thirds of what the large preset's overlays allocated.
func (o *overlay) indexVars(e *ovEntry) {
	if len(e.typ.Vars) < 2 {
		return
	}
	o.parts = facts.SplitKey(o.parts[:0], e.f.Key)
	vi := 0
	for i, sg := range e.typ.Segments {
		if sg.Var == "" {
			continue
		}
		if vi > 0 && i < len(o.parts) {
			sk := ovSegKey{e.typ, i, o.parts[i]}
			o.bySeg[sk] = append(o.bySeg[sk], e)
		}
		vi++
	}
}

// get returns the fact at key; own is set when the round wrote it.
func (o *overlay) get(key string) (f facts.Fact, ok, own bool) {
	if o.rec != nil {
		o.rec.get(key)
	}
	f, ok, own = o.lookup(key)
	if own {
		o.sawOwn()
	}
	return f, ok, own
}

// sawOwn marks the access being recorded as one that met the round's own
// writes: the result it serves is not what the reader alone holds.
func (o *overlay) sawOwn() {
	if o.rec != nil && !o.committed {
		o.rec.impure = true
	}
}

// lookup is get without recording the access.
func (o *overlay) lookup(key string) (f facts.Fact, ok, own bool) {
	if e, hit := o.w[key]; hit {
		return e.f, !e.deleted, !o.committed
	}
	f, ok = o.base.Get(key)
	return f, ok, false
}

// getPattern is get for p's key under b, looked up without allocating the
// key: the key returned is the stored fact's own when there is one (a
// written or deleted entry keeps its key too), so a read recorded by the
// caller shares it; a key found nowhere is interned (absent).
func (o *overlay) getPattern(p *rules.Pattern, b *binding) (key string, f facts.Fact, ok, own bool) {
	o.buf = p.AppendFormat(o.buf[:0], b.str)
	k := unsafe.String(unsafe.SliceData(o.buf), len(o.buf)) // not kept beyond the lookups
	// The base before the keys known absent from it: three in four of a
	// converge's reads find a fact there, and looking in both was a
	// third of the hashing a round did.
	if e, hit := o.w[k]; hit {
		key, f, ok, own = e.f.Key, e.f, !e.deleted, !o.committed
	} else if f, ok = o.base.Get(k); ok {
		key = f.Key
	} else if a, known := o.absent[k]; known {
		// Absent from the base, which is the round's snapshot: it does
		// not change while the overlay is in use.
		key = a
	} else {
		key = o.internAbsent()
	}
	if o.rec != nil {
		o.rec.get(key)
		if own {
			o.sawOwn()
		}
	}
	return key, f, ok, own
}

// internAbsent copies o.buf, a key the base does not hold, and remembers
// it (maxAbsent at most), so that reading it again does not copy it.
func (o *overlay) internAbsent() string {
	k := string(o.buf)
	if len(o.absent) < o.maxAbsent {
		if o.absent == nil {
			o.absent = map[string]string{}
		}
		o.absent[k] = k
	}
	return k
}

// visitor receives candidate facts; returning false stops the scan.
type visitor func(f facts.Fact, own bool) bool

// index names one index of the facts, which the base table and the
// round's writes both keep: under a key prefix, of a type, by a variable
// segment or by a string value.
type index struct {
	by     indexBy
	prefix string
	t      *facts.FactType
	pos    int // the variable's position in t.Vars (indexByVar)
	seg    int // the variable's segment index (indexByVar)
	v      string
}

type indexBy uint8

const (
	indexPrefix indexBy = iota
	indexType
	indexByVar
	indexByValue
)

// scan visits what ix holds as the round sees it: the base's facts it
// lists, less those the round wrote, then the round's entries it lists,
// less deletes. Each fact is visited once, the base's in the base's
// order, the writes in their index's (key order for a prefix, else the
// order first written). The access is recorded; meeting a write, a delete
// included, marks it as one that saw the round's own writes (sawOwn).
// The visitors are passed to the concrete indexes, not through function
// values, so that they stay on the stack: every join scans.
func (o *overlay) scan(ix index, fn visitor) {
	if o.rec != nil {
		switch ix.by {
		case indexPrefix:
			o.rec.prefix(ix.prefix)
		case indexType:
			o.rec.ofType(ix.t)
		case indexByVar:
			o.rec.seg(ix.t, ix.seg, ix.v)
		case indexByValue:
			o.rec.value(ix.t, ix.v)
		}
	}
	stop := false
	base := func(f facts.Fact) bool {
		if _, hit := o.w[f.Key]; hit {
			o.sawOwn()
			return true
		}
		stop = !fn(f, false)
		return !stop
	}
	switch ix.by {
	case indexPrefix:
		o.base.Prefix(ix.prefix, base)
	case indexType:
		o.base.OfType(ix.t, base)
	case indexByVar:
		o.base.ByVar(ix.t, ix.pos, ix.v, base)
	case indexByValue:
		o.base.ByValue(ix.t, ix.v, base)
	}
	if stop {
		return
	}
	written := func(e *ovEntry) bool {
		o.sawOwn()
		return e.deleted || fn(e.f, !o.committed)
	}
	var list []*ovEntry
	switch ix.by {
	case indexPrefix:
		o.keys.AscendGreaterOrEqual(&ovEntry{f: facts.Fact{Key: ix.prefix}}, func(e *ovEntry) bool {
			return strings.HasPrefix(e.f.Key, ix.prefix) && written(e)
		})
		return
	case indexType:
		list = o.byType[ix.t]
	case indexByVar:
		list = o.bySeg[ovSegKey{ix.t, ix.seg, ix.v}]
	case indexByValue:
		list = o.byVal[ovValKey{ix.t, ix.v}]
	}
	for _, e := range list {
		if ix.by == indexByValue && !e.deleted {
			// Listed under every value it has held: only its current
			// one counts. One that moved on is still a write met.
			if s, ok := facts.StringValue(e.f.Value); !ok || s != ix.v {
				o.sawOwn()
				continue
			}
		}
		if !written(e) {
			return
		}
	}
}

func (o *overlay) prefix(prefix string, fn visitor) {
	o.scan(index{by: indexPrefix, prefix: prefix}, fn)
}

func (o *overlay) ofType(t *facts.FactType, fn visitor) { o.scan(index{by: indexType, t: t}, fn) }

// count is about how many facts byVar (acc accByVar) or byValue visits:
// the base's index plus the round's writes listed under it, some of which
// may replace a base fact or no longer hold the value. Used to order a
// join, never to answer one.
func (o *overlay) count(t *facts.FactType, acc, pos, seg int, v string) int {
	if acc == accByValue {
		return o.base.CountByValue(t, v) + len(o.byVal[ovValKey{t, v}])
	}
	return o.base.CountByVar(t, pos, v) + len(o.bySeg[ovSegKey{t, seg, v}])
}

// countType is about how many facts ofType(t) visits: the base's and the
// round's writes of the type. Used to order a join, never to answer one.
func (o *overlay) countType(t *facts.FactType) int {
	return o.base.CountOfType(t) + len(o.byType[t])
}

// byVar visits facts of t whose variable pos (in t.Vars) is v; seg is
// that variable's segment index.
func (o *overlay) byVar(t *facts.FactType, pos, seg int, v string, fn visitor) {
	o.scan(index{by: indexByVar, t: t, pos: pos, seg: seg, v: v}, fn)
}

// byValue visits facts of t whose value is the string v.
func (o *overlay) byValue(t *facts.FactType, v string, fn visitor) {
	o.scan(index{by: indexByValue, t: t, v: v}, fn)
}
