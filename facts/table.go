package facts

import (
	"bytes"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/google/btree"
)

// entry is a fact as a Table keeps it. An update replaces the entry; only
// typ may be filled in later, when a plugin type for its key is registered.
type entry struct {
	Fact
	typ *FactType // nil for a key no fact type matches
	// typeAt and valueAt are the entry's positions in its type's list and
	// in its value's (Table.byValue), so that it leaves either by a swap
	// with the last. Within the 96 bytes the entry took before: the lists
	// replace a map per type and one per short string value, and most
	// values (an instance's address, its start time) are one fact's alone,
	// each a small map of its own: 120 of the 350 MB the large preset's
	// table held once converged.
	typeAt, valueAt int32
	// decoded is the value as a reader last decoded it (Fact.Decoded).
	decoded atomic.Pointer[Decoded]
}

// Decoded is a fact's value as a reader decoded it for a fact type: the
// rules engine decodes the same held facts again and again, and finding
// each one's decoded form by its text cost it a tenth of its time.
type Decoded struct {
	Type  *FactType // the type it was decoded as: a reader with another schema decodes again
	Value any       // the reader's own form, immutable
}

// Decoded returns the decoded form of f's value a reader last kept with
// it (KeepDecoded), or nil. Only a fact read from a Table keeps one, for
// as long as the Table holds that value: a Put of the key begins afresh.
func (f Fact) Decoded() *Decoded {
	if f.decoded == nil {
		return nil
	}
	return f.decoded.Load()
}

// KeepDecoded keeps d with f's value, where the Table f was read from
// keeps it (a fact not read from one keeps nothing). Readers may share a
// Table: the last one's is kept, and each checks Type.
func (f Fact) KeepDecoded(d *Decoded) {
	if f.decoded != nil {
		f.decoded.Store(d)
	}
}

func less(a, b *entry) bool { return a.Key < b.Key }

type varIndexKey struct {
	typ *FactType
	pos int    // variable position
	val string // the variable's segment
}

type valueKey struct {
	typ *FactType
	val string // the value's string form (StringValue)
}

// Table is an indexed in-memory set of facts: by key, in key order, by fact
// type, by each variable after the first, and by short string value. The
// Mirror keeps one in step with etcd; rule tests and `rules plan` fill one
// directly. A Table is not safe for concurrent use: the owner serializes.
// Nor may a visit change it: OfType and ByValue walk lists that a delete
// reorders (the last entry moves into the hole), so a fact put or deleted
// from inside fn may be visited twice or missed.
type Table struct {
	schema  *Schema
	log     *slog.Logger
	byKey   map[string]*entry
	tree    *btree.BTreeG[*entry]
	byType  map[*FactType][]*entry
	byValue map[valueKey][]*entry
	idx     map[varIndexKey]map[string]*entry
	rev     int64
	untyped int // facts whose key matches no fact type (kept, not indexed)
	// invalid holds the facts that break the schema (Fact.Invalid), so
	// that they can be counted and recorded without a scan.
	invalid map[string]*entry
}

// NewTable returns an empty table that types keys with schema (nil: Default).
func NewTable(schema *Schema) *Table {
	if schema == nil {
		schema = Default
	}
	return &Table{
		schema:  schema,
		log:     slog.New(slog.DiscardHandler),
		byKey:   map[string]*entry{},
		tree:    btree.NewG(32, less),
		byType:  map[*FactType][]*entry{},
		byValue: map[valueKey][]*entry{},
		idx:     map[varIndexKey]map[string]*entry{},
		invalid: map[string]*entry{},
	}
}

// Put adds or replaces a fact. A schema/ fact registers its plugin type.
func (m *Table) Put(f Fact) {
	if old, ok := m.byKey[f.Key]; ok {
		m.remove(old)
	}
	e := &entry{Fact: f}
	e.Invalid = ""
	e.Fact.decoded = &e.decoded
	if k, err := m.schema.Parse(f.Key); err == nil {
		e.typ = k.Type
		// Firing records are left undecoded: no rule reads them, and
		// the engine writes one for every firing.
		if k.Type.Name != "event" {
			if err := m.schema.checkValue(k, f); err != nil {
				e.Invalid = err.Error()
			}
		}
		if e.Invalid == "" && e.typ.Name == "schema" {
			m.registerPlugin(k.Args[0], f.Value)
		}
	} else {
		m.untyped++
		e.Invalid = err.Error()
	}
	if e.Invalid != "" {
		m.invalid[f.Key] = e
	}
	m.byKey[f.Key] = e
	m.tree.ReplaceOrInsert(e)
	if e.typ != nil {
		m.index(e, true)
	}
}

// Delete removes a fact and returns what it held.
func (m *Table) Delete(key string) (Fact, bool) {
	e, ok := m.byKey[key]
	if !ok {
		return Fact{}, false
	}
	m.remove(e)
	return e.Fact, true
}

// Invalid visits the facts that break the schema (Fact.Invalid says why),
// in no particular order; keys of no known form included.
func (m *Table) Invalid(fn func(Fact) bool) {
	for _, e := range m.invalid {
		if !fn(e.Fact) {
			return
		}
	}
}

// SetRev records the revision the table reflects.
func (m *Table) SetRev(rev int64) { m.rev = rev }

// Keys returns every key, in key order.
func (m *Table) Keys() []string {
	out := make([]string, 0, len(m.byKey))
	m.tree.Ascend(func(e *entry) bool { out = append(out, e.Key); return true })
	return out
}

func (m *Table) remove(e *entry) {
	delete(m.byKey, e.Key)
	delete(m.invalid, e.Key)
	m.tree.Delete(e)
	if e.typ != nil {
		m.index(e, false)
	} else {
		m.untyped--
	}
}

// registerPlugin registers a fact type read from schema/ and types the facts
// that were kept untyped until now.
func (m *Table) registerPlugin(name string, raw []byte) {
	if t, ok := m.schema.Type(name); ok && t.Builtin {
		return
	}
	if err := m.schema.RegisterFrom(name, raw); err != nil {
		m.log.Warn("bad fact type registration", "key", SchemaKey(name), "err", err)
		return
	}
	if m.untyped == 0 {
		return
	}
	var retype []*entry
	for _, e := range m.byKey {
		if e.typ == nil {
			retype = append(retype, e)
		}
	}
	for _, e := range retype {
		if k, err := m.schema.Parse(e.Key); err == nil {
			e.typ = k.Type
			m.untyped--
			e.Invalid = ""
			delete(m.invalid, e.Key)
			if err := m.schema.checkValue(k, e.Fact); err != nil {
				e.Invalid = err.Error()
				m.invalid[e.Key] = e
			}
			m.index(e, true)
		}
	}
}

// index adds (or removes) e in its type's list, the index of each variable
// after the first (the first is served by a prefix scan of the tree) and,
// for a short string value, that value's list.
func (m *Table) index(e *entry, add bool) {
	set := func(k varIndexKey) {
		s := m.idx[k]
		if add {
			if s == nil {
				s = map[string]*entry{}
				m.idx[k] = s
			}
			s[e.Key] = e
		} else if s != nil {
			delete(s, e.Key)
			if len(s) == 0 {
				delete(m.idx, k)
			}
		}
	}
	if add {
		e.typeAt = int32(len(m.byType[e.typ]))
		m.byType[e.typ] = append(m.byType[e.typ], e)
	} else {
		m.byType[e.typ] = unlist(m.byType[e.typ], e.typeAt, func(moved *entry) { moved.typeAt = e.typeAt })
	}
	if len(e.typ.Vars) > 1 {
		parts := strings.Split(e.Key, "/")
		vi := 0
		for i, sg := range e.typ.Segments {
			if sg.Var == "" {
				continue
			}
			if vi > 0 {
				set(varIndexKey{e.typ, vi, parts[i]})
			}
			vi++
		}
	}
	if s, ok := StringValue(e.Value); ok {
		k := valueKey{e.typ, s}
		if add {
			e.valueAt = int32(len(m.byValue[k]))
			m.byValue[k] = append(m.byValue[k], e)
		} else if l := unlist(m.byValue[k], e.valueAt, func(moved *entry) { moved.valueAt = e.valueAt }); len(l) > 0 {
			m.byValue[k] = l
		} else {
			delete(m.byValue, k)
		}
	}
}

// unlist removes the entry at position at from l, moving the last entry
// into its place (moved is told of it), and returns what is left. A list
// that fell to a quarter of its capacity is copied to one of half: one
// that held every pending instance of a large apply does not keep that
// room once they run.
func unlist(l []*entry, at int32, moved func(*entry)) []*entry {
	last := len(l) - 1
	if int(at) != last {
		l[at] = l[last]
		moved(l[at])
	}
	l[last] = nil
	l = l[:last]
	if c := cap(l); c > 64 && len(l) < c/4 {
		l = append(make([]*entry, 0, c/2), l...)
	}
	return l
}

// StringValue returns the content of a short JSON string without escapes, as
// the value index sees it.
func StringValue(raw []byte) (string, bool) {
	if len(raw) < 2 || len(raw) > 130 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') >= 0 || bytes.IndexByte(in, '"') >= 0 {
		return "", false
	}
	return string(in), true
}

// Reader reads facts. Every iteration stops early when fn returns false;
// keys are relative to the root.
type Reader interface {
	Rev() int64
	Len() int
	// Get must not keep key: callers look keys up from reused buffers.
	Get(key string) (Fact, bool)
	// Prefix visits the facts whose key starts with prefix, in key order.
	Prefix(prefix string, fn func(Fact) bool)
	// OfType visits every fact of a type, in no particular order.
	OfType(t *FactType, fn func(Fact) bool)
	// ByVar visits the facts of a type whose variable at position pos (in
	// FactType.Vars, pos >= 1) equals val. Position 0 is served by Prefix.
	ByVar(t *FactType, pos int, val string, fn func(Fact) bool)
	// ByValue visits the facts of a type whose value is the JSON string val.
	ByValue(t *FactType, val string, fn func(Fact) bool)
	CountOfType(t *FactType) int
}

var _ Reader = (*Table)(nil)

func (m *Table) Rev() int64 { return m.rev }
func (m *Table) Len() int   { return len(m.byKey) }

func (m *Table) Get(key string) (Fact, bool) {
	e, ok := m.byKey[key]
	if !ok {
		return Fact{}, false
	}
	return e.Fact, true
}

func (m *Table) Prefix(prefix string, fn func(Fact) bool) {
	m.tree.AscendGreaterOrEqual(&entry{Fact: Fact{Key: prefix}}, func(e *entry) bool {
		if !strings.HasPrefix(e.Key, prefix) {
			return false
		}
		return fn(e.Fact)
	})
}

func (m *Table) OfType(t *FactType, fn func(Fact) bool) {
	for _, e := range m.byType[t] {
		if !fn(e.Fact) {
			return
		}
	}
}

func (m *Table) CountOfType(t *FactType) int { return len(m.byType[t]) }

func (m *Table) ByVar(t *FactType, pos int, val string, fn func(Fact) bool) {
	if pos < 1 {
		panic("facts: ByVar position 0 is served by Prefix")
	}
	for _, e := range m.idx[varIndexKey{t, pos, val}] {
		if !fn(e.Fact) {
			return
		}
	}
}

// CountByVar is how many facts ByVar(t, pos, val) visits, without visiting them.
func (m *Table) CountByVar(t *FactType, pos int, val string) int {
	return len(m.idx[varIndexKey{t, pos, val}])
}

// CountByValue is how many facts ByValue(t, val) visits, without visiting them.
func (m *Table) CountByValue(t *FactType, val string) int {
	return len(m.byValue[valueKey{t, val}])
}

func (m *Table) ByValue(t *FactType, val string, fn func(Fact) bool) {
	for _, e := range m.byValue[valueKey{t, val}] {
		if !fn(e.Fact) {
			return
		}
	}
}
