package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/ccattler/ccattler/facts"
)

// specDigest returns the desired/service/{name}/spec_digest fact of a
// service's facts: a digest of its command, args, env and labels, so that
// the rollout (policies/rollout.hcl) can tell an instance started with
// other ones by one comparison, as it does for image, cpu and memory. A
// service that sets none of the four has no digest (ok false): its facts
// stay exactly those of the key schema.
//
// The digest covers each attribute's path and canonical value (fs holds
// what apply writes), in key order, so the same file always gives the
// same digest and any change to one of the four gives another.
func specDigest(name string, fs []Fact) (Fact, bool) {
	base := facts.DesiredService(name) + "/"
	h := sha256.New()
	n := 0
	for _, f := range fs { // sorted by key
		attr, ok := strings.CutPrefix(f.Key, base)
		if !ok || !digested(attr) {
			continue
		}
		n++
		h.Write([]byte(attr))
		h.Write([]byte{0})
		h.Write(f.Value)
		h.Write([]byte{0})
	}
	if n == 0 {
		return Fact{}, false
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	return Fact{Key: facts.ServiceSpecDigest(name), Value: []byte(`"` + sum + `"`)}, true
}

// digested reports whether a service attribute is what a container runs
// with beyond its image and resources (those the rollout compares itself).
func digested(attr string) bool {
	return attr == "command" || attr == "args" || strings.HasPrefix(attr, "env/") || strings.HasPrefix(attr, "labels/")
}
