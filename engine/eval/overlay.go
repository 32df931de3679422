package eval

import (
	"strings"

	"github.com/ccattler/ccattler/facts"
)

// overlay is the round's writes over the reader: read-your-writes. A later
// firing in the round sees earlier firings' writes; a fact read from here is
// marked Own in the plan (it has no etcd revision yet).
type overlay struct {
	base    facts.Reader
	schema  *facts.Schema
	w       map[string]*ovEntry            // written keys; deleted ones too
	byType  map[*facts.FactType][]*ovEntry // puts and deletes, by type
	version int                            // bumped on every write
}

type ovEntry struct {
	f       facts.Fact
	deleted bool
	typ     *facts.FactType
	parts   []string
}

func newOverlay(r facts.Reader, schema *facts.Schema) *overlay {
	return &overlay{base: r, schema: schema, w: map[string]*ovEntry{}, byType: map[*facts.FactType][]*ovEntry{}}
}

// put records a write (value nil: a delete).
func (o *overlay) put(key string, value []byte) {
	o.version++
	if e, ok := o.w[key]; ok {
		e.f.Value, e.deleted = value, value == nil
		return
	}
	e := &ovEntry{f: facts.Fact{Key: key, Value: value}, deleted: value == nil, parts: strings.Split(key, "/")}
	if k, err := o.schema.Parse(key); err == nil {
		e.typ = k.Type
		o.byType[e.typ] = append(o.byType[e.typ], e)
	}
	o.w[key] = e
}

// get returns the fact at key; own is set when the round wrote it.
func (o *overlay) get(key string) (f facts.Fact, ok, own bool) {
	if e, hit := o.w[key]; hit {
		return e.f, !e.deleted, true
	}
	f, ok = o.base.Get(key)
	return f, ok, false
}

// visitor receives candidate facts; returning false stops the scan.
type visitor func(f facts.Fact, own bool) bool

func (o *overlay) prefix(prefix string, fn visitor) {
	stop := false
	o.base.Prefix(prefix, func(f facts.Fact) bool {
		if _, hit := o.w[f.Key]; hit {
			return true
		}
		stop = !fn(f, false)
		return !stop
	})
	if stop {
		return
	}
	for k, e := range o.w {
		if !e.deleted && strings.HasPrefix(k, prefix) && !fn(e.f, true) {
			return
		}
	}
}

func (o *overlay) ofType(t *facts.FactType, fn visitor) {
	stop := false
	o.base.OfType(t, func(f facts.Fact) bool {
		if _, hit := o.w[f.Key]; hit {
			return true
		}
		stop = !fn(f, false)
		return !stop
	})
	if stop {
		return
	}
	for _, e := range o.byType[t] {
		if !e.deleted && !fn(e.f, true) {
			return
		}
	}
}

// byVar visits facts of t whose variable pos (in t.Vars) is val; seg is
// that variable's segment index.
func (o *overlay) byVar(t *facts.FactType, pos, seg int, v string, fn visitor) {
	stop := false
	o.base.ByVar(t, pos, v, func(f facts.Fact) bool {
		if _, hit := o.w[f.Key]; hit {
			return true
		}
		stop = !fn(f, false)
		return !stop
	})
	if stop {
		return
	}
	for _, e := range o.byType[t] {
		if !e.deleted && seg < len(e.parts) && e.parts[seg] == v && !fn(e.f, true) {
			return
		}
	}
}

func (o *overlay) byValue(t *facts.FactType, v string, fn visitor) {
	stop := false
	o.base.ByValue(t, v, func(f facts.Fact) bool {
		if _, hit := o.w[f.Key]; hit {
			return true
		}
		stop = !fn(f, false)
		return !stop
	})
	if stop {
		return
	}
	for _, e := range o.byType[t] {
		if e.deleted {
			continue
		}
		if s, ok := facts.StringValue(e.f.Value); ok && s == v && !fn(e.f, true) {
			return
		}
	}
}
