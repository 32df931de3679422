package agent_test

import (
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestFailedStartReportsItsImage: an instance that fails to start is
// reported failed with the image it tried, so that a rollout can tell the
// failures of its new image (policies/rollout.hcl).
func TestFailedStartReportsItsImage(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	cfg := sim.NewConfig()
	cfg.StartDelay, cfg.FailureRate = 0, 1
	fleet, err := sim.NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, fastConfig(s, t.TempDir()), simNodes(fleet, "n-", 1))
	putService(t, s, "web", "web:2")
	put(t, s, facts.InstanceService("bad01"), "web", facts.Placement("bad01"), "n-0001", facts.NodePlacement("n-0001", "bad01"), "web")
	waitFor(t, 10*time.Second, func() string {
		v := values(t, s, facts.Instance("bad01")+"/")
		if v[facts.InstanceState("bad01")] != "failed" || v[facts.InstanceImage("bad01")] != "web:2" {
			return "instance bad01: " + v[facts.InstanceState("bad01")] + " " + v[facts.InstanceImage("bad01")]
		}
		return ""
	})
}
