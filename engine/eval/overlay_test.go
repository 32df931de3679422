package eval

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// TestGetPatternKeys: a key looked up from the overlay's buffer comes back
// as the stored fact's own string when the fact exists, and as a copy when
// it does not: the next lookup reuses the buffer and must not change a key
// recorded earlier.
func TestGetPatternKeys(t *testing.T) {
	rs, _, diags := rules.LoadFilesWithSources(map[string][]byte{"count.hcl": []byte(countPlaced)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := rs.Rules[0].Body.Aggregates[0].Body.Match[0] // observed/instance/{i}/service
	tb := facts.NewTable(nil)
	stored := facts.InstanceService("a8f31")
	tb.Put(facts.Fact{Key: stored, Value: []byte(`"web"`), ModRevision: 1, CreateRevision: 1})
	ov := newOverlay(tb, rs.Schema)
	ov.put(facts.InstanceService("b0c1d"), []byte(`"api"`))
	bind := func(id string) *binding { b := &binding{}; b.push("i", strVal(id)); return b }

	key, f, ok, own := ov.getPattern(p, bind("a8f31"))
	if !ok || own || string(f.Value) != `"web"` || key != stored {
		t.Fatalf("stored fact: key %q ok %v own %v value %s", key, ok, own, f.Value)
	}
	if unsafeData(key) != unsafeData(f.Key) {
		t.Errorf("the key of a stored fact is a copy, want the fact's own string")
	}
	wkey, _, ok, own := ov.getPattern(p, bind("b0c1d"))
	if !ok || !own || wkey != facts.InstanceService("b0c1d") {
		t.Fatalf("written fact: key %q ok %v own %v", wkey, ok, own)
	}
	absent, _, ok, _ := ov.getPattern(p, bind("c2d3e"))
	if ok {
		t.Fatalf("%s found", absent)
	}
	ov.getPattern(p, bind("zzzzz"))
	if want := facts.InstanceService("c2d3e"); absent != want {
		t.Errorf("an absent key changed with the next lookup: %q, want %q", absent, want)
	}
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }

// TestGetPatternAbsentKeysShared: an absent key read again is the same
// string, not a copy for each read; once the round writes the fact, the
// read finds it (the interned absent key serves no lookup); and past
// maxAbsentKeys a key is still right, only copied.
func TestGetPatternAbsentKeysShared(t *testing.T) {
	rs, _, diags := rules.LoadFilesWithSources(map[string][]byte{"count.hcl": []byte(countPlaced)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := rs.Rules[0].Body.Aggregates[0].Body.Match[0] // observed/instance/{i}/service
	ov := newOverlay(facts.NewTable(nil), rs.Schema)
	bind := func(id string) *binding { b := &binding{}; b.push("i", strVal(id)); return b }

	first, _, ok, _ := ov.getPattern(p, bind("c2d3e"))
	ov.getPattern(p, bind("zzzzz"))
	again, _, ok2, _ := ov.getPattern(p, bind("c2d3e"))
	if ok || ok2 || first != facts.InstanceService("c2d3e") || again != first {
		t.Fatalf("absent reads: %q (found %v), %q (found %v)", first, ok, again, ok2)
	}
	if unsafeData(again) != unsafeData(first) {
		t.Errorf("an absent key read again is a new copy, want the first one's string")
	}
	ov.put(facts.InstanceService("c2d3e"), []byte(`"web"`))
	key, f, ok, own := ov.getPattern(p, bind("c2d3e"))
	if !ok || !own || string(f.Value) != `"web"` || key != first {
		t.Fatalf("after the write: key %q ok %v own %v value %s", key, ok, own, f.Value)
	}

	for i := len(ov.absent); i < maxAbsentKeys; i++ {
		ov.getPattern(p, bind(fmt.Sprintf("f%07d", i)))
	}
	if len(ov.absent) != maxAbsentKeys {
		t.Fatalf("%d absent keys interned, want %d", len(ov.absent), maxAbsentKeys)
	}
	over, _, ok, _ := ov.getPattern(p, bind("e9f8a"))
	if ok || over != facts.InstanceService("e9f8a") || len(ov.absent) != maxAbsentKeys {
		t.Fatalf("past the bound: key %q found %v, %d interned", over, ok, len(ov.absent))
	}
}

// TestOverlayOverAnyReader: a reader that is not a *facts.Table is read
// through a copy of its facts.
func TestOverlayOverAnyReader(t *testing.T) {
	type wrapped struct{ facts.Reader }
	tb := facts.NewTable(nil)
	tb.Put(facts.Fact{Key: facts.InstanceService("a8f31"), Value: []byte(`"web"`), ModRevision: 7, CreateRevision: 7})
	tb.SetRev(7)
	ov := newOverlay(wrapped{tb}, facts.Default)
	f, ok, own := ov.get(facts.InstanceService("a8f31"))
	if !ok || own || f.ModRevision != 7 || string(f.Value) != `"web"` || ov.base.Rev() != 7 {
		t.Errorf("through a copy: %+v ok %v own %v rev %d", f, ok, own, ov.base.Rev())
	}
}

// TestBindingKey: a binding's key lists its names sorted, whatever the
// order they were bound in, beyond the sixteen sorted on the stack too.
func TestBindingKey(t *testing.T) {
	for _, n := range []int{0, 1, 3, 16, 40} {
		fwd, back := &binding{}, &binding{}
		want := ""
		for i := range n {
			name := fmt.Sprintf("v%02d", i)
			fwd.push(name, strVal(fmt.Sprint(i)))
			want += fmt.Sprintf("%s=%d\x00", name, i)
		}
		for i := n - 1; i >= 0; i-- {
			back.push(fmt.Sprintf("v%02d", i), strVal(fmt.Sprint(i)))
		}
		if fwd.key() != want || back.key() != want {
			t.Errorf("%d names: keys %q and %q, want %q", n, fwd.key(), back.key(), want)
		}
	}
}

// TestBindingAppendKey: the key of a restriction, built without the
// restricted binding, is the restricted binding's key.
func TestBindingAppendKey(t *testing.T) {
	b := &binding{}
	for _, n := range []string{"svc", "id", "node", "id", "zone", "cpu"} {
		b.push(n, strVal(n+"-value"))
	}
	b.vals[3] = strVal("shadowed") // restrict keeps the first of a repeated name
	for _, keep := range []func(string) bool{
		func(string) bool { return true },
		func(string) bool { return false },
		func(n string) bool { return n == "id" || n == "zone" },
		func(n string) bool { return n != "svc" },
	} {
		if got, want := string(b.appendKey(nil, keep)), b.restrict(keep).key(); got != want {
			t.Errorf("appendKey %q, want restrict's key %q", got, want)
		}
	}
}

// TestOverlayByVarListsWrites: the round's writes are found by a variable
// after the first, as the base's facts are, the base fact a write replaces
// or deletes is not visited twice or at all, and a count weighs both.
// Only those variables are listed: the literal segments and the first
// variable (a prefix) are not, and looking one up finds nothing.
func TestOverlayByVarListsWrites(t *testing.T) {
	ep, _ := facts.Default.Type("endpoint.service")
	const val = `{"ip":"10.0.0.1","port":80}`
	tb := facts.NewTable(nil)
	tb.Put(facts.Fact{Key: facts.Endpoint("web", "a8f31"), Value: []byte(val), ModRevision: 1})
	tb.Put(facts.Fact{Key: facts.Endpoint("api", "a8f31"), Value: []byte(val), ModRevision: 1})
	tb.Put(facts.Fact{Key: facts.Endpoint("web", "b72c9"), Value: []byte(val), ModRevision: 1})
	ov := newOverlay(tb, facts.Default)
	ov.put(facts.Endpoint("db", "a8f31"), []byte(val))  // new
	ov.put(facts.Endpoint("web", "a8f31"), []byte(val)) // replaces the base's
	ov.put(facts.Endpoint("api", "a8f31"), nil)         // deletes the base's
	ov.put(facts.Endpoint("db", "c0ffe"), []byte(val))  // another instance
	const seg = 3                                       // endpoint/service/{name}/{instance-id}
	var got []string
	owns := 0
	ov.byVar(ep, 1, seg, "a8f31", func(f facts.Fact, own bool) bool {
		got = append(got, f.Key)
		if own {
			owns++
		}
		return true
	})
	want := []string{facts.Endpoint("db", "a8f31"), facts.Endpoint("web", "a8f31")}
	if !sameKeys(got, want) || owns != 2 {
		t.Fatalf("byVar(instance-id a8f31) = %v (%d own), want %v, both written", got, owns, want)
	}
	if n := ov.count(ep, accByVar, 1, seg, "a8f31"); n < len(want) {
		t.Errorf("count = %d, below the %d facts visited", n, len(want))
	}
	for _, k := range []ovSegKey{{ep, 0, "endpoint"}, {ep, 1, "service"}, {ep, 2, "db"}} {
		if l := ov.bySeg[k]; len(l) != 0 {
			t.Errorf("bySeg%v lists %d writes: only variables after the first are looked up", k, len(l))
		}
	}
}

func sameKeys(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, k := range a {
		seen[k]++
	}
	for _, k := range b {
		if seen[k]--; seen[k] < 0 {
			return false
		}
	}
	return true
}
