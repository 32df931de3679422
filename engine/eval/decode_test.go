package eval

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"github.com/ccattler/ccattler/facts"
)

// TestDecodeFastPath: decode's fast paths accept exactly what
// facts.ValueType.Decode accepts, with the same Go value, for every
// built-in fact type.
func TestDecodeFastPath(t *testing.T) {
	raws := []string{
		`0`, `-0`, `1`, `-1`, `4`, `0.1`, `2.5e3`, `1E-2`, `1e+2`, `+1`, `01`, `1.`, `.5`, `0x10`, `1_000`,
		`Inf`, `NaN`, `1e400`, `-1e400`, `9223372036854775807`, `9223372036854775808`, `3.0`,
		`"8Gi"`, `"64Mi"`, `"512"`, `"1.5Gi"`, `"-1Gi"`, `"lots"`, `""`,
		`"2026-11-29T19:00:00Z"`, `"2026-11-29T19:00:00.123456789+01:00"`, `"2026-11-29"`,
		`"500m"`, `"0.5"`, `"alive"`, `"running"`, `"healthy"`, `"nginx:1.28"`, `"10.1.0.5"`, `"node-1"`,
		`"a b"`, `"esc\"aped"`, `true`, `null`, `{}`, `{"ip":"10.1.0.5","port":8080}`, `[1]`, ` 1`, `1 `,
	}
	for _, ft := range facts.Default.Types() {
		t.Run(ft.Name, func(t *testing.T) {
			for _, raw := range raws {
				want, werr := ft.Value.Decode([]byte(raw))
				got, gerr := decode(ft.Value, []byte(raw))
				if (werr == nil) != (gerr == nil) {
					t.Errorf("%s: decode error %v, ValueType.Decode error %v", raw, gerr, werr)
					continue
				}
				if werr == nil && !reflect.DeepEqual(got, want) {
					t.Errorf("%s: decode = %#v, ValueType.Decode = %#v", raw, got, want)
				}
			}
		})
	}
}

func TestJSONNumber(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{"0", true}, {"-0", true}, {"12", true}, {"1.5", true}, {"1e5", true}, {"1E+5", true}, {"-1.5e-3", true},
		{"", false}, {"-", false}, {"01", false}, {"+1", false}, {"1.", false}, {".5", false}, {"1e", false},
		{"0x10", false}, {"1_0", false}, {"Inf", false}, {"1 ", false}, {`"1"`, false},
	} {
		if got := jsonNumber([]byte(tc.raw)); got != tc.want {
			t.Errorf("jsonNumber(%q) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

// TestValueCacheIsBounded: the decoded values an evaluator keeps are
// bounded per fact type, in number and in size, whatever an agent writes;
// a value past the bounds still decodes, the same as a kept one; a value
// that breaks the schema is an error and is not kept.
func TestValueCacheIsBounded(t *testing.T) {
	typ, _ := facts.Default.Type("observed.instance.image")
	c := valueCache{}
	for i := range maxCachedValues + 500 {
		raw := []byte(fmt.Sprintf(`"img-%d"`, i))
		v, err := c.decode(typ, raw)
		if err != nil || v.str != fmt.Sprintf("img-%d", i) {
			t.Fatalf("decode %s = %q, %v", raw, v.str, err)
		}
	}
	if n := len(c[typ]); n != maxCachedValues {
		t.Errorf("kept %d values of one type; want the bound %d", n, maxCachedValues)
	}
	big := []byte(`"` + strings.Repeat("x", 1000) + `"`) // under the image's own limit
	c = valueCache{}
	for range 3 {
		v, err := c.decode(typ, big)
		if err != nil || len(v.str) != 1000 {
			t.Fatalf("decode of a 1,000-byte value: %d bytes, %v", len(v.str), err)
		}
	}
	if len(c[typ]) != 0 {
		t.Errorf("a 1,000-byte value was kept; values over %d bytes are not", maxCachedValueBytes)
	}
	state, _ := facts.Default.Type("observed.instance.state")
	if _, err := c.decode(state, []byte(`"sideways"`)); err == nil {
		t.Error(`state "sideways" decoded; want the schema's error`)
	}
	if len(c[state]) != 0 {
		t.Error("a value that breaks the schema was kept")
	}
	// A kept value and its optional form are the same value each time.
	f := facts.Fact{Key: "observed/instance/i1/state", Value: []byte(`"running"`)}
	a, _ := c.optionalFact(state, f)
	b, _ := c.optionalFact(state, f)
	if a.str != "running" || a.cel != b.cel {
		t.Errorf("optional running: %q, %v then %v", a.str, a.cel, b.cel)
	}
}

// A held fact keeps the value it was decoded to, for the type it was
// decoded as, until its key is put again; a value too large to intern is
// decoded each time, and one of a type with too many values too.
func TestHeldFactsKeepTheirDecodedValue(t *testing.T) {
	state, _ := facts.Default.Type("observed.instance.state")
	tb := facts.NewTable(nil)
	key := "observed/instance/i1/state"
	tb.Put(facts.Fact{Key: key, Value: []byte(`"running"`), ModRevision: 2})
	c := valueCache{}
	f, _ := tb.Get(key)
	if f.Decoded() != nil {
		t.Fatal("a fact never decoded has a decoded form")
	}
	v, err := c.decodeFact(state, f)
	if err != nil || v.str != "running" {
		t.Fatalf("decode running = %q, %v", v.str, err)
	}
	again, _ := tb.Get(key)
	d := again.Decoded()
	if d == nil || d.Type != state || d.Value.(cachedVal).v.str != "running" {
		t.Fatalf("the held fact kept %+v; want running as %s", d, state.Name)
	}
	// What is kept is served, not looked up again: a cache that no longer
	// holds the text gives it without interning it anew.
	delete(c[state], `"running"`)
	if v, _ := c.decodeFact(state, again); v.str != "running" || len(c[state]) != 0 {
		t.Errorf("kept form gave %q; the cache holds %d values of the type, want 0 (served from the fact)", v.str, len(c[state]))
	}
	// Another reader's form kept under the same type is not taken for
	// the evaluator's: the value is decoded again.
	again.KeepDecoded(&facts.Decoded{Type: state, Value: "not a cachedVal"})
	if v, err := c.decodeFact(state, again); err != nil || v.str != "running" {
		t.Errorf("with another reader's form kept: %q, %v", v.str, err)
	}
	// Another type (another schema's) decodes afresh.
	other := *state
	if v, err := c.decodeFact(&other, again); err != nil || v.str != "running" {
		t.Errorf("decode as another type = %q, %v", v.str, err)
	}
	if len(c[&other]) != 1 {
		t.Error("a fact decoded as another type was served the first type's form")
	}
	// A new value of the key begins afresh: the old form is not served.
	tb.Put(facts.Fact{Key: key, Value: []byte(`"failed"`), ModRevision: 3})
	f, _ = tb.Get(key)
	if f.Decoded() != nil {
		t.Fatal("a put kept the old value's decoded form")
	}
	if v, _ := c.decodeFact(state, f); v.str != "failed" {
		t.Errorf("after a put: %q; want failed", v.str)
	}
	// A fact not read from a table keeps nothing, and is decoded right.
	loose := facts.Fact{Key: key, Value: []byte(`"stopped"`)}
	if v, _ := c.decodeFact(state, loose); v.str != "stopped" || loose.Decoded() != nil {
		t.Errorf("a loose fact: %q, kept %v", v.str, loose.Decoded())
	}
	// A value too large to intern is not kept with its fact either.
	img, _ := facts.Default.Type("observed.instance.image")
	big := `"` + strings.Repeat("x", 1000) + `"`
	tb.Put(facts.Fact{Key: "observed/instance/i1/image", Value: []byte(big), ModRevision: 4})
	f, _ = tb.Get("observed/instance/i1/image")
	if v, _ := c.decodeFact(img, f); len(v.str) != 1000 || f.Decoded() != nil {
		t.Errorf("a 1,000-byte value: %d bytes, kept %v", len(v.str), f.Decoded() != nil)
	}
}

// Evaluators with caches of their own read one table at once, as the
// engine and a plan do under the mirror's read lock: the kept forms are
// stored and loaded atomically (go test -race), and each reads its value.
func TestHeldFactsDecodedByConcurrentReaders(t *testing.T) {
	state, _ := facts.Default.Type("observed.instance.state")
	tb := facts.NewTable(nil)
	states := []string{"pending", "running", "stopped", "failed"}
	for i := range 200 {
		tb.Put(facts.Fact{Key: fmt.Sprintf("observed/instance/%05x/state", i), Value: []byte(`"` + states[i%len(states)] + `"`), ModRevision: int64(i + 2)})
	}
	done := make(chan error)
	for range 4 {
		go func() {
			c := valueCache{}
			for range 20 {
				for i := range 200 {
					f, _ := tb.Get(fmt.Sprintf("observed/instance/%05x/state", i))
					if v, err := c.decodeFact(state, f); err != nil || v.str != states[i%len(states)] {
						done <- fmt.Errorf("instance %d: %q, %v", i, v.str, err)
						return
					}
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// The texts numberTexts keeps are celVal's, the first time and every time
// after, past its bound too; -0 and 0 keep their own.
func TestNumberTextsAreCelVals(t *testing.T) {
	var nt numberTexts
	vals := []ref.Val{types.Int(0), types.Int(7), types.Int(100), types.Int(-3), types.Int(1 << 40),
		types.Double(0), types.Double(math.Copysign(0, -1)), types.Double(0.5), types.Double(1e21), types.Double(-2.25), types.String("x")}
	for range 2 {
		for _, v := range vals {
			if got, want := nt.number(v), celVal(v); got.str != want.str || got.cel != want.cel {
				t.Errorf("number(%v) = %q, want %q", v, got.str, want.str)
			}
		}
	}
	for i := range maxNumberTexts + 10 {
		v := types.Int(1000 + i)
		if got, want := nt.number(v), celVal(v); got.str != want.str {
			t.Fatalf("number(%v) = %q, want %q", v, got.str, want.str)
		}
	}
	if len(nt.ints) != maxNumberTexts {
		t.Errorf("kept %d texts, want the bound %d", len(nt.ints), maxNumberTexts)
	}
}
