package main

import (
	"testing"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
)

// A record touches an object when it read or wrote one of its keys or a key
// under it, and not a key of an object whose name only starts alike.
func TestDescribeTouches(t *testing.T) {
	e := audit.Event{EventRecord: facts.EventRecord{
		Writes: []facts.EventWrite{{Key: "desired/service/webapp/image"}},
		Reads:  []facts.EventRead{{Key: "placement/instance/a8f31"}},
	}}
	for key, want := range map[string]bool{
		"desired/service/webapp":    true,
		"desired/service/web":       false,
		"placement/instance/a8f31":  true,
		"placement/instance/a8f3":   false,
		"observed/instance/a8f31":   false,
		"desired/service/webapp/im": false,
	} {
		if got := touches(e, key); got != want {
			t.Errorf("touches(%s) = %v, want %v", key, got, want)
		}
	}
}
