package agent_test

import (
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// An agent started while etcd is down works from its cache, and once etcd
// answers it follows placements again.
func TestAgentStartedWithoutEtcd(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	putService(t, s, "web", "nginx:1.28")
	put(t, s, facts.InstanceService("aaaaa"), "web", facts.Placement("aaaaa"), "sim-0001")
	e.Close()

	store, err := agent.Connect(e.Endpoints(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fleet, _ := sim.NewFleet(sim.NewConfig())
	startAgent(t, fastConfig(store, t.TempDir()), simNodes(fleet, "sim-", 1))
	time.Sleep(6 * time.Second)
	e.Restart(t)
	waitFor(t, 30*time.Second, func() string {
		if st := values(t, s, facts.InstanceState("aaaaa"))[facts.InstanceState("aaaaa")]; st != "running" {
			return "state " + st
		}
		return ""
	})
	put(t, s, facts.InstanceService("bbbbb"), "web", facts.Placement("bbbbb"), "sim-0001")
	del(t, s, facts.Placement("aaaaa"))
	waitFor(t, 30*time.Second, func() string {
		got := values(t, s, "observed/instance/")
		if got[facts.InstanceState("aaaaa")] != "stopped" || got[facts.InstanceState("bbbbb")] != "running" {
			return "placements after the outage not followed"
		}
		if len(values(t, s, facts.Lease("sim-0001"))) != 1 {
			return "no lease"
		}
		return ""
	})
}
