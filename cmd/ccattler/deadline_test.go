package main

import (
	"strings"
	"testing"
)

// TestUntimedCommandsExist: every command exempt from --timeout is one the
// binary has (a renamed command would silently get the deadline), and the
// client commands are not exempt.
func TestUntimedCommandsExist(t *testing.T) {
	root := newRootCmd()
	for path := range untimed {
		c, _, err := root.Find(strings.Fields(path)[1:])
		if err != nil || c.CommandPath() != path {
			t.Errorf("untimed %q: no such command (found %v, %v)", path, c.CommandPath(), err)
		}
	}
	for _, path := range []string{"ccattler apply", "ccattler get", "ccattler delete", "ccattler facts get", "ccattler cluster members"} {
		if untimed[path] {
			t.Errorf("%s runs without a deadline", path)
		}
	}
}
