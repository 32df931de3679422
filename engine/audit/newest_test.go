package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// Newest reads backwards in pages: across several pages it visits every
// record once, newest first, at one revision; it stops when told, and at
// the first record older than since.
func TestNewestVisitsBackwardsAtOneRevision(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	ctx := context.Background()
	ids := facts.NewEventIDs()
	var ops []facts.Op
	var mid time.Time
	qs := 0        // records binding i=q
	const n = 2345 // more than two pages
	for i := range n {
		id, at := ids.Next()
		if i == n/2 {
			mid = at
		}
		if i%26 == 'q'-'a' {
			qs++
		}
		b, _ := json.Marshal(facts.EventRecord{Rule: "r", Bindings: map[string]string{"i": string(rune('a' + i%26))}, Time: at.Format(time.RFC3339Nano)})
		ops = append(ops, facts.Put(facts.Event(id), b))
		if len(ops) == 100 || i == n-1 {
			if _, err := s.Commit(ctx, facts.Txn{Ops: ops}); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	badID, _ := ids.Next()
	if _, err := etcdtest.PutRaw(ctx, s, facts.Event(badID), "not json"); err != nil {
		t.Fatal(err)
	}
	all, _, _, err := audit.List(ctx, s, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range all {
		want = append(want, e.ID)
	}
	slices.Reverse(want)

	var got []string
	written := false
	rev, read, bad, err := audit.Newest(ctx, s, audit.Query{}, func(e audit.Event) bool {
		got = append(got, e.ID)
		if !written { // a record committed during the visit is not part of it
			id, _ := ids.Next()
			if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Event(id), []byte(`{"rule":"late","time":"x"}`))}}); err != nil {
				t.Fatal(err)
			}
			written = true
		}
		return true
	})
	if err != nil || bad != 1 || rev == 0 || read != n+1 {
		t.Fatalf("Newest: rev %d, read %d, bad %d, err %v", rev, read, bad, err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("visited %d records, want the %d in reverse order (first %v, want %v)", len(got), len(want), got[:3], want[:3])
	}

	got = got[:0]
	if _, _, _, err := audit.Newest(ctx, s, audit.Query{}, func(e audit.Event) bool { got = append(got, e.ID); return len(got) < 10 }); err != nil || len(got) != 10 {
		t.Errorf("stopped after %d, want 10 (%v)", len(got), err)
	}
	got = got[:0]
	if _, read, _, err := audit.Newest(ctx, s, audit.Query{Limit: 700}, func(e audit.Event) bool { got = append(got, e.ID); return true }); err != nil || read != 700 || len(got) != 699 {
		t.Errorf("limit 700: read %d, visited %d (the bad record aside), %v", read, len(got), err)
	}
	// The raw test sees every record's bytes; only those it keeps are decoded.
	got = got[:0]
	raws := 0
	_, read, bad, err = audit.Newest(ctx, s, audit.Query{Raw: func(b []byte) bool { raws++; return strings.Contains(string(b), `"i":"q"`) }},
		func(e audit.Event) bool { got = append(got, e.ID); return true })
	if err != nil || raws != read || bad != 0 || len(got) != qs {
		t.Errorf("raw filter: %d tested, %d read, %d bad, %d kept, %v", raws, read, bad, len(got), err)
	}
	got = got[:0]
	if _, _, _, err := audit.Newest(ctx, s, audit.Query{Since: mid}, func(e audit.Event) bool { got = append(got, e.ID); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) < n/2-1 || len(got) > n/2+2 { // the half after mid, the late record and the bad one aside
		t.Errorf("since the middle record: %d visited, want about %d", len(got), n/2)
	}
	for _, id := range got {
		if at, ok := facts.EventTime(id); ok && at.Before(mid) {
			t.Errorf("%s is older than since", id)
		}
	}
}

// MentionsName finds a name as a whole word of a record's bytes, wherever
// the record holds it (a key's segment, a binding, a written value), and
// not inside a longer name or id.
func TestMentionsName(t *testing.T) {
	rec := func(r facts.EventRecord) []byte {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	has := audit.MentionsName("web", "a8f31", "node-1")
	for _, tc := range []struct {
		name string
		rec  facts.EventRecord
		want bool
	}{
		{"a key's last segment", facts.EventRecord{Rule: "apply", Writes: []facts.EventWrite{{Key: facts.ServiceImage("api")}, {Key: "desired/service/web"}}}, true},
		{"a key's inner segment", facts.EventRecord{Rule: "r", Reads: []facts.EventRead{{Key: facts.InstanceState("a8f31")}}}, true},
		{"a binding", facts.EventRecord{Rule: "r", Bindings: map[string]string{"node": "node-1"}}, true},
		{"a written value", facts.EventRecord{Rule: "schedule", Writes: []facts.EventWrite{{Key: facts.Placement("b0000"), Value: facts.RawJSON(`"node-1"`)}}}, true},
		{"a longer name", facts.EventRecord{Rule: "apply", Writes: []facts.EventWrite{{Key: facts.ServiceImage("webapp")}, {Key: facts.ServiceImage("my-web")}}}, false},
		{"a longer id", facts.EventRecord{Rule: "r", Reads: []facts.EventRead{{Key: facts.InstanceState("a8f310")}, {Key: facts.InstanceState("0a8f31")}}}, false},
		{"a node of another number", facts.EventRecord{Rule: "r", Bindings: map[string]string{"node": "node-10"}}, false},
		{"none", facts.EventRecord{Rule: "r"}, false},
	} {
		if got := has(rec(tc.rec)); got != tc.want {
			t.Errorf("%s: %s: got %v, want %v", tc.name, rec(tc.rec), got, tc.want)
		}
	}
	if audit.MentionsName()([]byte(`{"rule":"web"}`)) {
		t.Error("no names: a record mentions none")
	}
}

// BenchmarkRecordFilters: what passing over a record that names none of a
// large service's 10,001 names costs, by word lookup and by searching for
// each, against decoding it.
func BenchmarkRecordFilters(b *testing.B) {
	names := []string{"web"}
	for i := range 10000 {
		names = append(names, fmt.Sprintf("a%04x", i))
	}
	raw, _ := json.Marshal(facts.EventRecord{Rule: "publish_endpoint", Kind: "firing",
		Bindings: map[string]string{"id": "c0ffe", "svc": "api", "node": "node-7"},
		Reads:    []facts.EventRead{{Key: facts.InstanceState("c0ffe"), Rev: 12345}, {Key: facts.InstanceHealth("c0ffe"), Rev: 12346}, {Key: facts.Placement("c0ffe"), Rev: 12300}},
		Writes:   []facts.EventWrite{{Key: facts.Endpoint("api", "c0ffe"), Value: facts.RawJSON(`{"ip":"10.1.7.3","port":8080}`)}},
		Time:     "2026-11-29T18:00:00.123456789Z"})
	f := facts.Fact{Key: facts.Event("20261129T180000.123456789Z-000001"), Value: raw, ModRevision: 12400}
	b.Run("words", func(b *testing.B) {
		has := audit.MentionsName(names...)
		for b.Loop() {
			if has(raw) {
				b.Fatal("matched")
			}
		}
	})
	b.Run("search-each", func(b *testing.B) {
		has := audit.Mentions(names...)
		for b.Loop() {
			if has(raw) {
				b.Fatal("matched")
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := audit.Decode(f); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzMentionsName holds MentionsName to a plain statement of what it
// finds: a name with no name byte (a-z, 0-9, '-') on either side of it.
func FuzzMentionsName(f *testing.F) {
	f.Add([]byte(`{"rule":"r","bindings":{"node":"node-1"}}`), "node-1")
	f.Add([]byte(`{"writes":[{"key":"desired/service/webapp/image"}]}`), "web")
	f.Add([]byte(`web`), "web")
	f.Add([]byte("\xffa8f31\x00"), "a8f31")
	f.Add([]byte(`--web--`), "web")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		if name == "" || strings.IndexFunc(name, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-') }) >= 0 {
			return // not a name or an id: describe passes none such
		}
		re := regexp.MustCompile(`(^|[^a-z0-9-])` + regexp.QuoteMeta(name) + `($|[^a-z0-9-])`)
		if got, want := audit.MentionsName(name)(b), re.Match(b); got != want {
			t.Errorf("MentionsName(%q)(%q) = %v, want %v", name, b, got, want)
		}
	})
}
