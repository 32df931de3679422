package facts

import "math"

// Uncommitted is the ModRevision of a fact laid over a view by ViewOver:
// a write whose revision the reader cannot know yet. Compared in etcd it
// matches nothing, so a read of it that reached a guard unresolved would
// fail it rather than pass.
const Uncommitted int64 = math.MaxInt64

// Overlay is a write to lay over a view: a put, or a delete when Value is
// nil. Since is the revision at which its writer read the key (0: read as
// absent): the write is laid only while the mirror's fact is no newer. A
// newer fact is the write itself come back through the watch, or another
// writer's, which either made the write fail its guard or came after it.
type Overlay struct {
	Key   string
	Value []byte
	Since int64
}

// Laid is an Overlay that was laid, with the mirror's fact it hid (UnderOK
// false: the key was absent).
type Laid struct {
	Overlay
	Under   Fact
	UnderOK bool
}

// ViewOver runs fn like View, but with writes laid over the mirror's
// facts, so that a writer whose writes have not yet come back through the
// watch reads them as if they had (read-your-writes across commits still
// on their way). Laid puts have ModRevision and CreateRevision Uncommitted.
// fn runs under the mirror's write lock, so no other reader ever sees a
// laid write, and they are taken away before ViewOver returns, also when fn
// panics. fn gets the writes laid, in the order given (a key given twice:
// the last).
func (m *Mirror) ViewOver(writes []Overlay, fn func(r Reader, laid []Laid)) {
	if len(writes) == 0 { // nothing to lay: a view other readers may share
		m.View(func(r Reader) { fn(r, nil) })
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.t
	type undo struct {
		key string
		old *entry // nil: the key was absent
	}
	undos := make([]undo, 0, len(writes))
	seen := make(map[string]int, len(writes)) // key -> its index in laid
	laid := make([]Laid, 0, len(writes))
	defer func() {
		for i := len(undos) - 1; i >= 0; i-- {
			u := undos[i]
			if cur, ok := t.byKey[u.key]; ok {
				t.remove(cur)
			}
			if u.old != nil {
				t.restore(u.old)
			}
		}
	}()
	for _, w := range writes {
		cur, ok := t.byKey[w.Key]
		if i, again := seen[w.Key]; again {
			laid[i].Overlay = w // the later write wins; the first undo restores the mirror's fact
		} else {
			if ok && cur.ModRevision > w.Since {
				continue
			}
			under := Laid{Overlay: w}
			if ok {
				under.Under, under.UnderOK = cur.Fact, true
			}
			undos = append(undos, undo{key: w.Key, old: cur})
			seen[w.Key] = len(laid)
			laid = append(laid, under)
		}
		if ok {
			t.remove(cur)
		}
		if w.Value != nil {
			t.lay(w.Key, w.Value)
		}
	}
	fn(t, laid)
}

// lay puts a fact its writer has checked against the schema already, at
// revision Uncommitted: it is not checked again, and a schema/ fact
// registers no plugin type (the write may never commit).
func (m *Table) lay(key string, value []byte) {
	e := &entry{Fact: Fact{Key: key, Value: value, ModRevision: Uncommitted, CreateRevision: Uncommitted}}
	if k, err := m.schema.Parse(key); err == nil {
		e.typ = k.Type
	} else {
		e.Invalid = err.Error()
	}
	m.restore(e)
}

// restore puts back an entry as it was, without parsing or checking it
// again.
func (m *Table) restore(e *entry) {
	if e.Invalid != "" {
		m.invalid[e.Key] = e
	}
	m.byKey[e.Key] = e
	m.tree.ReplaceOrInsert(e)
	if e.typ != nil {
		m.index(e, true)
	} else {
		m.untyped++
	}
}
