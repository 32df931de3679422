package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// Volumes end to end on simulated nodes: the agent reports where a service's
// volume is attached, and the scheduler keeps the service's instances there
// (a real container's data surviving its replacement is tested with
// containerd in agent/containerd).

const volumeFile = `volume "data" {
  size        = "1Gi"
  persistent  = true
  access_mode = "single-node"
}

service "db" {
  image     = %q
  instances = 1
  expose    = [5432]
  volume    = "data"
}
`

func TestVolumePinsReplacementsEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "3", "--node-prefix", "n-")
	c.waitFor(20*time.Second, "three nodes hold leases", func() bool { return len(c.list("lease/node/")) == 3 })
	dir := t.TempDir()
	apply := func(image string) {
		t.Helper()
		if r := c.srv.ccattler(t, "apply", "-f", writeService(t, dir, fmt.Sprintf(volumeFile, image))); r.code != 0 {
			t.Fatalf("apply %s: %s", image, r.stderr)
		}
	}
	apply("db:1")
	var first instance
	c.waitFor(20*time.Second, "db running, its volume attached to its node and the service pinned there", func() bool {
		run := c.running()
		if len(run) != 1 {
			return false
		}
		first = run[0]
		node := `"` + first.placed + `"`
		return c.get(facts.VolumeAttachedNode("data")) == node && c.get(facts.VolumeState("data")) == `"attached"` &&
			c.get(facts.ServicePin("db")) == node
	})

	// A new image: the replacement starts first, and on the volume's node,
	// although spreading alone would put it on another one.
	apply("db:2")
	c.waitFor(30*time.Second, "db replaced by an instance of db:2 on the same node", func() bool {
		run := c.running()
		if len(run) != 1 || run[0].id == first.id {
			return false
		}
		return strings.Trim(c.get(facts.InstanceImage(run[0].id)), `"`) == "db:2"
	})
	if got := c.running()[0].placed; got != first.placed {
		t.Errorf("the replacement runs on %s, want %s where volume data is attached", got, first.placed)
	}
	if r := c.srv.ccattler(t, "get", "volumes"); !strings.Contains(r.stdout, first.placed) || !strings.Contains(r.stdout, "attached") {
		t.Errorf("get volumes does not show data attached to %s:\n%s", first.placed, r.stdout)
	}
}
