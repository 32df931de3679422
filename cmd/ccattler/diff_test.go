package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/whatif"
	"github.com/ccattler/ccattler/facts"
)

// TestKeyDiffsCountWhatTheyDoNotList: a rule's changes past the first ten
// are counted by operation and kind of key (a plugin type's template, from
// the plan's schema), the most first, with thousands separated; other
// rules are listed as before; --all lists everything.
func TestKeyDiffsCountWhatTheyDoNotList(t *testing.T) {
	schema := facts.NewSchema()
	if err := schema.Register("plugin.thing", "plugin/thing", facts.ValueType{Kind: facts.KindInt}, "a plugin's fact"); err != nil {
		t.Fatal(err)
	}
	var d whatif.Diff
	d.Changes = append(d.Changes, whatif.KeyDiff{Op: whatif.Put, Key: "endpoint/service/web/a0001", Rule: "publish_endpoint", Value: []byte(`{"ip":"10.0.0.1","port":80}`)})
	for i := range 12345 {
		d.Changes = append(d.Changes, whatif.KeyDiff{Op: whatif.Delete, Key: fmt.Sprintf("placement/instance/%05x", i), Rule: "stop_placed_extras", Was: []byte(`"node-1"`)})
	}
	for i := range 3 {
		d.Changes = append(d.Changes, whatif.KeyDiff{Op: whatif.Change, Key: fmt.Sprintf("observed/instance/%05x/state", i), Rule: "stop_placed_extras", Value: []byte(`"stopped"`), Was: []byte(`"running"`)})
	}
	d.Changes = append(d.Changes, whatif.KeyDiff{Op: whatif.Put, Key: "plugin/thing", Rule: "stop_placed_extras", Value: []byte(`1`)})

	var b strings.Builder
	printKeyDiffs(&b, d, "now", keyListing{schema: schema})
	out := b.String()
	want := "\npublish_endpoint\n  + endpoint/service/web/a0001 = {\"ip\":\"10.0.0.1\",\"port\":80}\n\nstop_placed_extras\n"
	if !strings.HasPrefix(out, want) {
		t.Fatalf("output starts:\n%s\nwant:\n%s", out[:min(len(out), 300)], want)
	}
	if n := strings.Count(out, "\n  - placement/instance/"); n != 10 {
		t.Errorf("%d placements listed, want 10", n)
	}
	if !strings.HasSuffix(out, "  … and 12,339 more (--all lists them): 12,335 × - placement/instance/{instance-id}, 3 × ~ observed/instance/{instance-id}/state, 1 × + plugin/thing\n") {
		t.Errorf("output ends:\n%s", out[max(0, len(out)-300):])
	}

	b.Reset()
	printKeyDiffs(&b, d, "now", keyListing{all: true, schema: schema})
	if n := strings.Count(b.String(), "\n  "); n != len(d.Changes) || strings.Contains(b.String(), "more (--all") {
		t.Errorf("--all: %d lines of changes, want %d", n, len(d.Changes))
	}
}

// TestKeyKindsStayOneLine: keys of no type count as their parent's, and
// past maxKinds kinds the rest are summed.
func TestKeyKindsStayOneLine(t *testing.T) {
	var cs []whatif.KeyDiff
	for i := range 12 {
		for j := range 12 - i {
			cs = append(cs, whatif.KeyDiff{Op: whatif.Put, Key: fmt.Sprintf("untyped/k%02d/%d", i, j)})
		}
	}
	got := kindsOf(cs, facts.Default)
	want := "12 × + untyped/k00/*, 11 × + untyped/k01/*, 10 × + untyped/k02/*, 9 × + untyped/k03/*, 8 × + untyped/k04/*, 7 × + untyped/k05/*, 6 × + untyped/k06/*, 5 × + untyped/k07/*, 10 of 4 other kinds"
	if got != want {
		t.Errorf("kindsOf:\n got %s\nwant %s", got, want)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 99990: "99,990", 1234567: "1,234,567", -1234: "-1,234", -123: "-123"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
