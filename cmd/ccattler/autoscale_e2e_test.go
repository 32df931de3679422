package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
)

// Autoscaling end to end: the real server with the default policies
// (autoscale.hcl) and a process of simulated nodes reporting each instance's
// share of a synthetic load, which the test sets through the sim's plugin
// fact sim/service/web/load.

const autoscaledService = `service "web" {
  image     = "web:1"
  instances = 2
  expose    = [8080]
  autoscale {
    metric        = "cpu"
    threshold     = 0.5
    min           = 2
    max           = 6
    stabilization = "4s"
  }
}
`

func TestAutoscalingEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "3", "--node-prefix", "n-", "--metrics-interval", "200ms")
	c.waitFor(20*time.Second, "three nodes hold leases and the sim's load type is registered", func() bool {
		return len(c.list("lease/node/")) == 3 && c.get(facts.SchemaKey(sim.LoadFactType)) != ""
	})
	knobs := c.pluginStore()
	dir := t.TempDir()
	if r := c.srv.ccattler(t, "apply", "-f", writeService(t, dir, autoscaledService)); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	effective := func() string { return c.get(facts.EffectiveInstances("web")) }
	serving := func(n int) func() bool {
		return func() bool {
			s, err := c.sample("web")
			return err == nil && s.serving == n && s.live == n && effective() == fmt.Sprint(n)
		}
	}
	c.waitFor(20*time.Second, "2 instances serving", serving(2))
	load := func(cores float64) {
		t.Helper()
		if _, err := knobs.PutValue(context.Background(), sim.LoadKey("web"), cores); err != nil {
			t.Fatal(err)
		}
	}
	b, stop := c.watchService("web")
	defer stop()

	// 2 cores over 2 instances: 1 core each, twice the threshold: 4.
	load(2)
	c.waitFor(20*time.Second, "scaled up to ceil(2 × 1.0 / 0.5) = 4", serving(4))
	if got := c.get(facts.Intent("autoscaler", "web")); got != "4" {
		t.Errorf("intent/autoscaler = %s, want 4", got)
	}

	// 5 cores: 10 wanted, max is 6.
	load(5)
	c.waitFor(20*time.Second, "scaled up to max 6", serving(6))

	// Almost no load: 1 wanted, min is 2; only after the 4 s window.
	load(0.2)
	dropped := time.Now()
	c.waitFor(5*time.Second, "the recommendation falls to min 2", func() bool {
		return c.get(facts.AutoscaleRecommendation("web")) == "2"
	})
	if time.Since(dropped) < time.Second && effective() != "6" {
		t.Errorf("effective = %s within a second of the load dropping, want 6 until the window has passed", effective())
	}
	c.waitFor(20*time.Second, "scaled down to min 2 after the window", serving(2))
	took := time.Since(dropped)
	t.Logf("scale-down took %s after the load dropped (window 4s, refreshed every 2s)", took.Round(time.Millisecond))
	if took < 2*time.Second {
		t.Errorf("scaled down %s after the load dropped, want no sooner than the window allows (>= 2s)", took)
	}
	b.mu.Lock()
	if b.maxLive > 6 {
		t.Errorf("%d instances at once, want at most max 6", b.maxLive)
	}
	b.mu.Unlock()

	// Autoscaling removed: the user's instances applies again.
	plain := `service "web" {
  image     = "web:1"
  instances = 3
  expose    = [8080]
}
`
	if r := c.srv.ccattler(t, "apply", "-f", writeService(t, dir, plain)); r.code != 0 {
		t.Fatalf("apply without autoscale: %s", r.stderr)
	}
	load(5) // ignored now
	c.waitFor(20*time.Second, "the user's 3 instances", serving(3))
	time.Sleep(time.Second)
	if e := effective(); e != "3" {
		t.Errorf("effective = %s after autoscaling was removed under load, want the user's 3", e)
	}
}
