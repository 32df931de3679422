package access

import "testing"

func TestSpeaks(t *testing.T) {
	for _, tc := range []struct {
		principal, node string
		want            bool
	}{
		{"node:node-2", "node-2", true},
		{"node:node-2", "node-20", false},
		{"node:node-20", "node-2", false},
		{"node:sim-*", "sim-0001", true},
		{"node:sim-*", "node-1", false},
		{"node:*", "any", true},
		{"user:node-2", "node-2", false},
		{"engine", "node-2", false},
		{"node:node-2", "", false},
		{"node:", "", false},
		{"node:Node-2", "Node-2", false}, // not a principal
	} {
		if got := Speaks(tc.principal, tc.node); got != tc.want {
			t.Errorf("Speaks(%q, %q) = %v, want %v", tc.principal, tc.node, got, tc.want)
		}
	}
}
