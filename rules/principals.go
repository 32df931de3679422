package rules

import (
	"sort"
	"strings"
)

// Principals maps each principal a rule may declare to the key prefixes it
// may write. It mirrors the trust table of the key schema: the engine's
// controllers each own a tree, and "admin" may write anything. A rule that
// writes outside its principal's trees is a load error.
var Principals = map[string][]string{
	"admin":           {""},
	"intent-resolver": {"effective/"},
	"autoscaler":      {"intent/autoscaler/", "observed/service/"},
	"policy":          {"intent/policy/"},
	"instances":       {"observed/instance/", "observed/service/"},
	"scheduler":       {"placement/"},
	"network":         {"endpoint/"},
	"failure":         {"observed/node/", "observed/instance/", "observed/disruption/"},
	"reconcile":       {"placement/"},
	"gc":              {"observed/", "placement/", "endpoint/"},
}

func principalNames() []string {
	out := make([]string, 0, len(Principals))
	for n := range Principals {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// mayWrite reports whether principal p may write every key of the head:
// the head's literal prefix (up to its first variable) lies in one of p's trees.
func mayWrite(p string, h *Head) bool {
	lp := literalPrefix(h.Segs)
	for _, prefix := range Principals[p] {
		if strings.HasPrefix(lp, prefix) {
			return true
		}
	}
	return false
}
