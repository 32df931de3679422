package access

import "strings"

// Speaks reports whether principal is node id's identity: node:{id}, or
// node:{prefix}* of a simulated fleet whose prefix id has. A connection to
// node id's agent is believed only when the agent's certificate names such
// a principal.
func Speaks(principal, id string) bool {
	kind, name, err := Kind(principal)
	if err != nil || kind != KindNode || id == "" {
		return false
	}
	if prefix, fleet := strings.CutSuffix(name, "*"); fleet {
		return strings.HasPrefix(id, prefix)
	}
	return name == id
}
