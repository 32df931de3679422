package engine

import (
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
)

// A read of the clock is never compared: the server rewrites it every second,
// so a plan that takes longer than a tick would otherwise never commit.
func TestClockReadsAreNotGuarded(t *testing.T) {
	tests := []struct {
		r    eval.Read
		want bool
	}{
		{eval.Read{Key: "observed/clock", Rev: 7}, false},
		{eval.Read{Key: "observed/node/node-1/state", Rev: 7}, true},
		{eval.Read{Key: "observed/node/node-1/lost_at", Rev: 0}, true},
		{eval.Read{Key: "observed/node/node-1/state", Own: true}, false},
		{eval.Read{Key: "observed/instance/a8f31/state", Rev: 3, NoGuard: true}, false},
	}
	for _, tt := range tests {
		if got := guarded(tt.r); got != tt.want {
			t.Errorf("guarded(%+v) = %v, want %v", tt.r, got, tt.want)
		}
	}
}
