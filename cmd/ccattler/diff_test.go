package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/whatif"
)

// TestKeyDiffsCountWhatTheyDoNotList: a rule's changes past the first ten
// are counted by operation and kind of key, the most first, with thousands
// separated; other rules are listed as before; --all lists everything.
func TestKeyDiffsCountWhatTheyDoNotList(t *testing.T) {
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
	printKeyDiffs(&b, d, "now", false)
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
	printKeyDiffs(&b, d, "now", true)
	if n := strings.Count(b.String(), "\n  "); n != len(d.Changes) || strings.Contains(b.String(), "more (--all") {
		t.Errorf("--all: %d lines of changes, want %d", n, len(d.Changes))
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 99990: "99,990", 1234567: "1,234,567", -1234: "-1,234", -123: "-123"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
