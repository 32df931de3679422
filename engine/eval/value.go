package eval

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
	"github.com/ccattler/ccattler/facts"
)

// val is a bound value: its CEL form and the string form joins and
// firing records use (a string as is, anything else as canonical JSON).
type val struct {
	cel ref.Val // nil: the string str (strVal)
	str string
}

// strVal is a string value. Its CEL form is made when CEL reads it (cel
// nil): most bound key segments are only joined on, by their string, and
// boxing each as a ref.Val was a sixth of the engine's allocations.
func strVal(s string) val { return val{str: s} }

// celOf is v's CEL form.
func (v val) celOf() ref.Val {
	if v.cel == nil {
		return types.String(v.str)
	}
	return v.cel
}

// isString reports whether v is a CEL string.
func (v val) isString() bool {
	if v.cel == nil {
		return true
	}
	_, ok := v.cel.(types.String)
	return ok
}

// goVal wraps a decoded fact value (facts.ValueType.Decode).
func goVal(v any) val {
	c := types.DefaultTypeAdapter.NativeToValue(v)
	return val{cel: c, str: stringOf(v)}
}

// valueCache interns decoded fact values by fact type: joins meet the same
// few states and the same node and service names again and again, and
// decoding one (JSON to Go to CEL) each time was a tenth of what the
// engine allocated. A fact type's value schema never changes (a plugin
// type registered again is a new FactType). CEL values are immutable, so
// bindings share them. An interned value is kept with the held facts it
// was found for too (facts.Decoded, whose Value is a cachedVal), so that
// reading one of them again does not look its text up.
type valueCache map[*facts.FactType]map[string]*facts.Decoded

// cachedVal is a decoded value, and the same as an optional's present value.
type cachedVal struct{ v, opt val }

// maxCachedValues bounds the values kept of one fact type: past it, those
// of the type are decoded each time (instance IPs and timestamps are as
// many as the instances, and meet a join once or twice).
const maxCachedValues = 4096

// maxCachedValueBytes bounds the size of a value kept: the values joins
// meet again and again are short (states, names, quantities), and a fact
// type's values may each be as large as etcd takes, so that 4,096 of them
// unbounded could hold hundreds of megabytes.
const maxCachedValueBytes = 256

// decode is decode(t.Value, raw) as a bound value.
func (c valueCache) decode(t *facts.FactType, raw []byte) (val, error) {
	cv, _, err := c.lookup(t, raw)
	return cv.v, err
}

// decodeFact is decode for the value of f, a fact of type t.
func (c valueCache) decodeFact(t *facts.FactType, f facts.Fact) (val, error) {
	cv, err := c.ofFact(t, f)
	return cv.v, err
}

// optionalFact is decodeFact as an optional's present value.
func (c valueCache) optionalFact(t *facts.FactType, f facts.Fact) (val, error) {
	cv, err := c.ofFact(t, f)
	return cv.opt, err
}

// ofFact is lookup for f's value: the decoded form kept with f when it
// was decoded as t (by an evaluator: another reader's form is not used),
// else the interned one, then kept with f.
func (c valueCache) ofFact(t *facts.FactType, f facts.Fact) (cachedVal, error) {
	if d := f.Decoded(); d != nil && d.Type == t {
		if cv, ok := d.Value.(cachedVal); ok {
			return cv, nil
		}
	}
	cv, d, err := c.lookup(t, f.Value)
	if d != nil {
		f.KeepDecoded(d)
	}
	return cv, err
}

// lookup decodes raw as a value of t, interned when it is short and t has
// not too many: d is the interned one (nil: not kept).
func (c valueCache) lookup(t *facts.FactType, raw []byte) (cv cachedVal, d *facts.Decoded, err error) {
	m := c[t]
	if d, ok := m[string(raw)]; ok {
		return d.Value.(cachedVal), d, nil
	}
	dv, err := decode(t.Value, raw)
	if err != nil {
		return cachedVal{}, nil, err
	}
	v := goVal(dv)
	cv = cachedVal{v: v, opt: val{cel: types.OptionalOf(v.celOf()), str: v.str}}
	if m == nil {
		m = map[string]*facts.Decoded{}
		c[t] = m
	}
	if len(m) < maxCachedValues && len(raw) <= maxCachedValueBytes {
		d = &facts.Decoded{Type: t, Value: cv}
		m[string(raw)] = d
	}
	return cv, d, nil
}

// maxNumberTexts bounds the texts numberTexts keeps.
const maxNumberTexts = 4096

// numberTexts keeps the text of the numbers a choice's aggregates come to:
// the scheduler's candidates are served their nodes' used cpu and memory
// again and again (sums of a few requests: few values), and formatting
// each afresh was a tenth of what a medium converge allocated.
type numberTexts struct {
	ints    map[int64]string
	doubles map[uint64]string
}

// number is celVal(v), its text kept when v is a number.
func (nt *numberTexts) number(v ref.Val) val {
	if nt.ints == nil {
		nt.ints, nt.doubles = map[int64]string{}, map[uint64]string{}
	}
	switch x := v.(type) {
	case types.Int:
		if x < 0 || x >= 100 { // below, strconv's own: no allocation
			return keptText(nt.ints, int64(x), v)
		}
	case types.Double:
		return keptText(nt.doubles, math.Float64bits(float64(x)), v)
	}
	return celVal(v)
}

// keptText is celVal(v) with its text kept in texts under k.
func keptText[K comparable](texts map[K]string, k K, v ref.Val) val {
	if s, ok := texts[k]; ok {
		return val{cel: v, str: s}
	}
	cv := celVal(v)
	if len(texts) < maxNumberTexts {
		texts[k] = cv.str
	}
	return cv
}

// celVal wraps a value computed by CEL. The scalars every let, aggregate
// and score computes take their string form directly: through native they
// were boxed into an interface first, an allocation for each.
func celVal(c ref.Val) val {
	switch x := c.(type) {
	case types.String:
		return val{cel: c, str: string(x)}
	case types.Int:
		return val{cel: c, str: strconv.FormatInt(int64(x), 10)}
	case types.Double:
		return val{cel: c, str: strconv.FormatFloat(float64(x), 'f', -1, 64)}
	case types.Bool:
		return val{cel: c, str: strconv.FormatBool(bool(x))}
	}
	n, err := native(c)
	if err != nil {
		return val{cel: c, str: fmt.Sprint(c.Value())}
	}
	return val{cel: c, str: stringOf(n)}
}

func stringOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case time.Duration:
		return x.String()
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	case nil:
		return "null"
	}
	b, err := facts.CanonicalJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// native converts a CEL value to the Go value facts.ValueType.Encode takes.
func native(v ref.Val) (any, error) {
	switch x := v.(type) {
	case types.String:
		return string(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return int64(x), nil
	case types.Double:
		return float64(x), nil
	case types.Bool:
		return bool(x), nil
	case types.Duration:
		return x.Duration, nil
	case types.Timestamp:
		return x.Time, nil
	case types.Null:
		return nil, nil
	case *types.Optional:
		if !x.HasValue() {
			return nil, nil
		}
		return native(x.GetValue())
	case *types.Err:
		return nil, x
	}
	if m, ok := v.(traits.Mapper); ok {
		out := map[string]any{}
		it := m.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string: JSON objects have string keys", k.Value())
			}
			e, err := native(m.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	}
	if l, ok := v.(traits.Lister); ok {
		n := int(l.Size().(types.Int))
		out := make([]any, n)
		for i := 0; i < n; i++ {
			e, err := native(l.Get(types.Int(i)))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot store a CEL %s as a fact value", v.Type())
}

// binding is a stack of variable bindings: patterns push as they match and
// pop as the join backtracks. Lookups search from the top.
type binding struct {
	names []string
	vals  []val
}

func (b *binding) get(name string) (val, bool) {
	if i := b.index(name); i >= 0 {
		return b.vals[i], true
	}
	return val{}, false
}

// index is where name is bound (its last binding), or -1.
func (b *binding) index(name string) int {
	for i := len(b.names) - 1; i >= 0; i-- {
		if b.names[i] == name {
			return i
		}
	}
	return -1
}

func (b *binding) has(name string) bool { _, ok := b.get(name); return ok }

func (b *binding) push(name string, v val) {
	b.names = append(b.names, name)
	b.vals = append(b.vals, v)
}

func (b *binding) len() int { return len(b.names) }

func (b *binding) truncate(n int) {
	b.names = b.names[:n]
	b.vals = b.vals[:n]
}

// clone copies b with room for eight more values: most copies are
// extended next (a candidate's aggregates and lets, a join's variables).
func (b *binding) clone() *binding { return b.cloneRoom(8) }

// cloneRoom copies b with room for that many more values: growing the
// slices one push at a time was a fifth of what a scheduling round
// allocated.
func (b *binding) cloneRoom(room int) *binding {
	n := len(b.names) + room
	return &binding{names: append(make([]string, 0, n), b.names...), vals: append(make([]val, 0, n), b.vals...)}
}

// borrow returns a copy of b to work on, from the round's spares; hand it
// back with giveBack once nothing refers to it.
func (rd *round) borrow(b *binding) *binding {
	w := rd.spare()
	if w == nil {
		return b.clone()
	}
	w.names, w.vals = append(w.names, b.names...), append(w.vals, b.vals...)
	return w
}

// borrowOnly is b.restrict to names, in a binding borrowed from the
// round (giveBack).
func (rd *round) borrowOnly(b *binding, names []string) *binding {
	w := rd.spare()
	if w == nil {
		w = &binding{}
	}
	return b.restrictTo(w, func(n string) bool { return slices.Contains(names, n) })
}

// spare is an empty binding handed back to the round, or nil when there is none.
func (rd *round) spare() *binding {
	n := len(rd.spares)
	if n == 0 {
		return nil
	}
	w := rd.spares[n-1]
	rd.spares = rd.spares[:n-1]
	w.names, w.vals = w.names[:0], w.vals[:0]
	return w
}

// borrowReads lends a scratch slice for a join's reads, holding reads;
// giveReads takes it back. A join appends a read per fact it binds, and
// growing a fresh slice in every join was a tenth of the engine's
// allocations: what a caller keeps of it, it copies.
func (rd *round) borrowReads(reads []Read) []Read {
	if n := len(rd.readBufs); n > 0 {
		buf := rd.readBufs[n-1]
		rd.readBufs = rd.readBufs[:n-1]
		return append(buf[:0], reads...)
	}
	return append(make([]Read, 0, len(reads)+8), reads...)
}

func (rd *round) giveReads(buf []Read) { rd.readBufs = append(rd.readBufs, buf[:0]) }

func (rd *round) giveBack(w *binding) {
	clear(w.vals[:cap(w.vals)]) // let go of the values
	rd.spares = append(rd.spares, w)
}

// within reports whether every bound value's CEL size is at most n: its
// string form is at least as long as a string's runes or a list's or map's
// entries.
func (b *binding) within(n int) bool {
	for _, v := range b.vals {
		if len(v.str) > n {
			return false
		}
	}
	return true
}

// str returns a bound variable's string form ("" when unbound).
func (b *binding) str(name string) string {
	v, _ := b.get(name)
	return v.str
}

// restrict keeps only the named variables.
func (b *binding) restrict(keep func(string) bool) *binding {
	n := 0
	for _, name := range b.names {
		if keep(name) {
			n++
		}
	}
	return b.restrictTo(&binding{names: make([]string, 0, n), vals: make([]val, 0, n)}, keep)
}

// restrictTo pushes onto out, empty, the values of b that keep names, the
// first of each name, and returns it.
func (b *binding) restrictTo(out *binding, keep func(string) bool) *binding {
	for i, n := range b.names {
		if keep(n) && !out.has(n) {
			out.push(n, b.vals[i])
		}
	}
	return out
}

// strings returns the binding as a map of string forms, for plans.
func (b *binding) strings() map[string]string {
	out := make(map[string]string, len(b.names))
	for i, n := range b.names {
		out[n] = b.vals[i].str
	}
	return out
}

// key is a canonical rendering of the binding: names sorted, for dedup and
// order. It is built often (every solution, every task queued), so it
// writes into one allocation of the exact length.
func (b *binding) key() string {
	n := 0
	for i, name := range b.names {
		n += len(name) + len(b.vals[i].str) + 2
	}
	k := b.appendKey(make([]byte, 0, n), nil)
	return unsafe.String(unsafe.SliceData(k), len(k)) // k is not written again
}

// appendKey appends b.restrict(keep).key() to dst, without building the
// restricted binding; with keep nil, b.key().
func (b *binding) appendKey(dst []byte, keep func(string) bool) []byte {
	var arr [16]int
	for _, i := range b.sorted(arr[:0], keep) {
		dst = append(dst, b.names[i]...)
		dst = append(dst, '=')
		dst = append(dst, b.vals[i].str...)
		dst = append(dst, 0)
	}
	return dst
}

// sorted appends to idx the indexes of b's names that keep accepts, sorted
// by name, and with keep the first of a repeated name only, as restrict
// keeps it (nil: every name, repeated ones too). An insertion sort: a
// binding has a handful of names.
func (b *binding) sorted(idx []int, keep func(string) bool) []int {
	for i, name := range b.names {
		if keep == nil || keep(name) {
			idx = append(idx, i)
		}
	}
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0 && b.names[idx[j]] < b.names[idx[j-1]]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	if keep == nil {
		return idx
	}
	out := idx[:0]
	for k, i := range idx {
		if k == 0 || b.names[i] != b.names[idx[k-1]] {
			out = append(out, i)
		}
	}
	return out
}

// activation lets CEL read a binding without building a map.
type activation struct {
	b    *binding
	now  ref.Val
	lazy *lazyAggregates // a choice's aggregates, computed when first read
}

var _ interpreter.Activation = (*activation)(nil)

func (a *activation) ResolveName(name string) (any, bool) {
	if i := a.b.index(name); i >= 0 {
		v := a.b.vals[i]
		if a.lazy != nil && a.lazy.tracing && i < a.lazy.outer {
			a.lazy.traceOuter(name, v)
		}
		return v.celOf(), true
	}
	if a.lazy != nil {
		if v, ok := a.lazy.resolve(name); ok {
			return v, true
		}
	}
	if name == "now" {
		return a.now, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// decode is facts.ValueType.Decode with a fast path for the common scalar
// values (a short JSON string without escapes, a JSON integer): most facts
// are those, and decoding them through encoding/json dominated a full
// evaluation. Constraints (enum members, formats, ranges) are still checked
// by the slow path whenever the fast one does not apply exactly.
func decode(t facts.ValueType, raw []byte) (any, error) {
	switch t.Kind {
	case facts.KindString:
		if s, ok := facts.StringValue(raw); ok {
			switch t.Format {
			case "":
				return s, nil
			case "name":
				if facts.CheckSegment("name", s) == nil {
					return s, nil
				}
			}
		}
	case facts.KindIP:
		if s, ok := facts.StringValue(raw); ok && net.ParseIP(s) != nil {
			return s, nil
		}
	case facts.KindObject:
		if len(t.Fields) == 0 && string(raw) == "{}" {
			return map[string]any{}, nil
		}
	case facts.KindEnum:
		if s, ok := facts.StringValue(raw); ok {
			for _, e := range t.Enum {
				if s == e {
					return s, nil
				}
			}
		}
	case facts.KindInt:
		if t.Min == nil && t.Max == nil {
			if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
				return i, nil
			}
		} else if jsonNumber(raw) {
			if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil && inRange(t, float64(i)) {
				return i, nil
			}
		}
	// A scheduler's choice decodes every candidate node's capacity and
	// every instance's requests: cpu and memory take the fast path too.
	case facts.KindCPU:
		if jsonNumber(raw) {
			if f, err := strconv.ParseFloat(string(raw), 64); err == nil && f >= 0 && !math.IsInf(f, 0) && inRange(t, f) {
				return f, nil
			}
		}
	case facts.KindMemory:
		if s, ok := facts.StringValue(raw); ok {
			if n, err := facts.ParseMemory(s); err == nil {
				return n, nil
			}
		}
	case facts.KindTime:
		if s, ok := facts.StringValue(raw); ok {
			if tm, err := time.Parse(time.RFC3339Nano, s); err == nil {
				return tm, nil
			}
		}
	}
	return t.Decode(raw)
}

func inRange(t facts.ValueType, f float64) bool {
	return (t.Min == nil || f >= *t.Min) && (t.Max == nil || f <= *t.Max)
}

// jsonNumber reports whether raw is exactly a JSON number (RFC 8259), so
// that strconv's more lenient parsers ("+1", "0x10", "1_000", "Inf") never
// accept what the slow path would reject.
func jsonNumber(raw []byte) bool {
	i, n := 0, len(raw)
	if i < n && raw[i] == '-' {
		i++
	}
	switch {
	case i < n && raw[i] == '0':
		i++
	case i < n && raw[i] >= '1' && raw[i] <= '9':
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < n && raw[i] == '.' {
		i++
		if i == n || raw[i] < '0' || raw[i] > '9' {
			return false
		}
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
	}
	if i < n && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < n && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		if i == n || raw[i] < '0' || raw[i] > '9' {
			return false
		}
		for i < n && raw[i] >= '0' && raw[i] <= '9' {
			i++
		}
	}
	return i == n
}
