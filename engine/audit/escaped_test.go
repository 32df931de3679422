package audit_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// A user may write records (an apply's is committed with its writes), and
// so may write one whose names and keys JSON spells with escapes:
// "\u0073chedule" decodes to schedule, "observed\/instance" to
// observed/instance. The text tests that let readers pass over records
// undecoded (a filter's Raw, Mentions, MentionsName) must not hide such a
// record from those asking for its rule, key or names. Secure etcd: the
// records are written with the user's own certificate under its default
// rules.
func TestTextTestsSeeEscapedRecords(t *testing.T) {
	ctx := context.Background()
	e := etcdtest.StartSecure(t)
	root := e.StoreAs(t, access.Root)
	mallory := e.Admit(t, nil, "user:mallory")
	ids := facts.NewEventIDs()
	write := func(s *facts.Store, raw string) string {
		t.Helper()
		id, _ := ids.Next()
		if _, err := etcdtest.PutRaw(ctx, s, facts.Event(id), raw); err != nil {
			t.Fatal(err)
		}
		return id
	}
	plain, _ := json.Marshal(facts.EventRecord{Rule: "schedule", Bindings: map[string]string{"id": "a8f31"},
		Writes: []facts.EventWrite{{Key: facts.Placement("a8f31"), Value: facts.RawJSON(`"node-1"`)}}})
	write(root, string(plain))
	other := write(root, `{"rule":"publish_endpoint","writes":[{"key":"endpoint/service/api/c0001","value":{}}]}`)
	hiddenRule := write(mallory, `{"rule":"\u0073chedule","bindings":{"svc":"\u0077eb"}}`)
	hiddenKey := write(mallory, `{"rule":"apply","writes":[{"key":"observed\/instance\/b72c9\/state","value":"running"}]}`)
	spaced := write(mallory, `{ "rule" : "schedule" }`)

	newest := func(q audit.Query, match func(audit.Event) bool) []string {
		t.Helper()
		var got []string
		if _, _, _, err := audit.Newest(ctx, root, q, func(ev audit.Event) bool {
			if match == nil || match(ev) {
				got = append(got, ev.ID)
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	for _, c := range []struct {
		name string
		flt  audit.Filter
		want string // among the records the filter finds
	}{
		{"rule", audit.Filter{Rule: "schedule"}, hiddenRule},
		{"key", audit.Filter{KeyPrefix: "observed/instance/b72c9/"}, hiddenKey},
	} {
		all := newest(audit.Query{}, c.flt.Match)
		if !slices.Contains(all, c.want) || c.name == "rule" && !slices.Contains(all, spaced) {
			t.Fatalf("%s: %+v matches %v decoded, want %s among them", c.name, c.flt, all, c.want)
		}
		if got := newest(audit.Query{Raw: c.flt.Raw()}, c.flt.Match); !slices.Equal(got, all) {
			t.Errorf("%s: Newest with the filter's Raw found %v, without it %v", c.name, got, all)
		}
		listed, _, _, err := audit.List(ctx, root, c.flt)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ev := range listed {
			ids = append(ids, ev.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, all) {
			t.Errorf("%s: List found %v, want %v", c.name, ids, all)
		}
		// The test passes over what cannot match: the other rule's record.
		if raw := c.flt.Raw(); raw == nil || raw([]byte(`{"rule":"publish_endpoint","writes":[{"key":"endpoint/service/api/c0001"}]}`)) {
			t.Errorf("%s: the filter's Raw passes a record of neither its rule nor its key", c.name)
		}
	}
	// A name that another only starts like passes over the other's records.
	if (audit.Filter{Rule: "schedul"}).Raw()(plain) {
		t.Errorf("--rule schedul's text test passes a record of schedule")
	}
	for name, raw := range map[string]func([]byte) bool{
		"Mentions":     audit.Mentions("web"),
		"MentionsName": audit.MentionsName("web", "node-9"),
	} {
		if got := newest(audit.Query{Raw: raw}, nil); !slices.Contains(got, hiddenRule) || slices.Contains(got, other) {
			t.Errorf("%s(web) passes %v: want %s (web escaped) and not %s", name, got, hiddenRule, other)
		}
	}
	names, err := audit.RuleNames(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"apply", "publish_endpoint", "schedule"}; !slices.Equal(names, want) {
		t.Errorf("RuleNames = %v, want %v", names, want)
	}
}

// A record's rule is read from its first field when it begins with it, as
// the project writes records, and decoded otherwise: escaped, after other
// fields, or not a record at all.
func TestRuleOf(t *testing.T) {
	for raw, want := range map[string]string{
		`{"rule":"schedule","bindings":{"id":"a8f31"}}`: "schedule",
		`{"rule":"\u0073chedule"}`:                      "schedule",
		`{"bindings":{"rule":"x"},"rule":"apply"}`:      "apply",
		` {"rule":"agent"}`:                             "agent",
		`{"rule":"unterminated`:                         "",
		`not json`:                                      "",
		`{"rule":42}`:                                   "",
		`{"rule":"x","rule":"y"}`:                       "y",
		`{"rule":"x","bindings":{"rule":"z"}}`:          "x",
	} {
		if got := audit.RuleOf([]byte(raw)); got != want {
			t.Errorf("RuleOf(%s) = %q, want %q", raw, got, want)
		}
	}
}
