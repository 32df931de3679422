package etcdtest_test

import (
	"testing"

	"github.com/ccattler/ccattler/facts/etcdtest"
)

// FreePort never returns a port twice in a process: the kernel offers a
// port just closed again (about one in eight of 2,000 listens in a row
// here), and a member whose client and peer URL got the same port never
// started.
func TestFreePortNeverRepeats(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		p := etcdtest.FreePort(t)
		if seen[p] {
			t.Fatalf("port %d returned twice", p)
		}
		seen[p] = true
	}
}
