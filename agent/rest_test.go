package agent_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// countingRuntime is a simulated runtime that counts its lists. It hides
// the runtime's Version: a node over it lists at every wake.
type countingRuntime struct {
	agent.Runtime
	lists atomic.Int64
}

func (c *countingRuntime) List(ctx context.Context) ([]agent.Status, error) {
	c.lists.Add(1)
	return c.Runtime.List(ctx)
}

// versionedRuntime is a countingRuntime that tells its version.
type versionedRuntime struct{ *countingRuntime }

func (v versionedRuntime) Version() uint64 { return v.Runtime.(agent.Versioner).Version() }

// A node whose runtime tells its version leaves out the passes its timer
// alone wakes it for while nothing changed, and still reports an exit or a
// health change the runtime tells of no other way; a node whose runtime
// cannot tell lists at every tick.
func TestSettledNodeListsOnlyOnChange(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	fleet, err := sim.NewFleet(sim.Config{StartDelay: 10 * time.Millisecond, Range: sim.NewConfig().Range, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	quiet := &countingRuntime{Runtime: fleet.Node("quiet-1")}
	busy := &countingRuntime{Runtime: fleet.Node("busy-1")}
	nodes := []agent.NodeConfig{
		{ID: "quiet-1", CPU: 4, Memory: 8 << 30, Architecture: "amd64", Zone: "sim-1", Runtime: versionedRuntime{quiet}},
		{ID: "busy-1", CPU: 4, Memory: 8 << 30, Architecture: "amd64", Zone: "sim-1", Runtime: busy},
	}
	cfg := fastConfig(s, "")
	cfg.Resync = 50 * time.Millisecond
	startAgent(t, cfg, nodes)

	putService(t, s, "web", "nginx:1.28")
	ids := []string{"a0001", "a0002", "b0001"}
	put(t, s, facts.InstanceService("a0001"), "web", facts.Placement("a0001"), "quiet-1", facts.NodePlacement("quiet-1", "a0001"), "web",
		facts.InstanceService("a0002"), "web", facts.Placement("a0002"), "quiet-1", facts.NodePlacement("quiet-1", "a0002"), "web",
		facts.InstanceService("b0001"), "web", facts.Placement("b0001"), "busy-1", facts.NodePlacement("busy-1", "b0001"), "web")
	waitFor(t, 20*time.Second, func() string {
		obs := values(t, s, "observed/instance/")
		for _, id := range ids {
			if obs[facts.InstanceState(id)] != "running" || obs[facts.InstanceHealth(id)] != "healthy" {
				return fmt.Sprintf("%s is %q, %q", id, obs[facts.InstanceState(id)], obs[facts.InstanceHealth(id)])
			}
		}
		return ""
	})
	// The passes the starts and reports poked end; then the node settles.
	waitFor(t, 10*time.Second, func() string {
		n := quiet.lists.Load()
		time.Sleep(300 * time.Millisecond)
		if d := quiet.lists.Load() - n; d > 0 {
			return fmt.Sprintf("the node still listed %d times in 300ms of 50ms ticks", d)
		}
		return ""
	})
	q0, b0 := quiet.lists.Load(), busy.lists.Load()
	time.Sleep(time.Second) // 16-20 ticks of each node
	if got := quiet.lists.Load() - q0; got > 1 {
		t.Errorf("the settled node listed %d times in a second of ticks; want none", got)
	}
	if got := busy.lists.Load() - b0; got < 8 {
		t.Errorf("the node whose runtime has no version listed %d times in a second of 50ms ticks; want one a tick", got)
	}

	t.Run("a health change is reported", func(t *testing.T) {
		fleet.SetHealth("a0001", agent.Unhealthy)
		waitFor(t, 5*time.Second, func() string {
			if h := values(t, s, facts.InstanceHealth("a0001"))[facts.InstanceHealth("a0001")]; h != agent.Unhealthy {
				return "health " + h
			}
			return ""
		})
	})
	t.Run("an exit is reported", func(t *testing.T) {
		if !fleet.Exit("quiet-1", "a0002", 3) {
			t.Fatal("no container a0002 on quiet-1")
		}
		waitFor(t, 5*time.Second, func() string {
			if st := values(t, s, facts.InstanceState("a0002"))[facts.InstanceState("a0002")]; st != "failed" {
				return "state " + st
			}
			return ""
		})
	})
}
