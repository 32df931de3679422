package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
)

// Rolling updates and health replacement end to end: the real server with
// the default policies (rollout.hcl, health.hcl) and a process of simulated
// nodes. The sim runs an image whose name contains "unhealthy" as instances
// that report unhealthy, and turns one instance unhealthy through its knob
// sim/instance/{id}/health.

// serviceSample is one consistent look at a service's instances: every list
// is read at the same revision.
type serviceSample struct {
	live      int            // instances pending or running, placed or not (a stopping one still runs)
	serving   int            // running, healthy and placed
	endpoints int            // endpoint/service/{name}/*
	images    map[string]int // image -> serving instances running it
}

func (c *cluster) sample(svc string) (serviceSample, error) {
	ctx := context.Background()
	ins, rev, err := c.store.List(ctx, "observed/instance/", 0)
	if err != nil {
		return serviceSample{}, err
	}
	place, _, err := c.store.List(ctx, "placement/instance/", rev)
	if err != nil {
		return serviceSample{}, err
	}
	eps, _, err := c.store.List(ctx, "endpoint/service/"+svc+"/", rev)
	if err != nil {
		return serviceSample{}, err
	}
	placed := map[string]bool{}
	for _, f := range place {
		placed[strings.TrimPrefix(f.Key, "placement/instance/")] = true
	}
	attrs := map[string]map[string]string{}
	for _, f := range ins {
		parts := strings.Split(f.Key, "/")
		if len(parts) != 4 {
			continue
		}
		if attrs[parts[2]] == nil {
			attrs[parts[2]] = map[string]string{}
		}
		attrs[parts[2]][parts[3]] = strings.Trim(string(f.Value), `"`)
	}
	s := serviceSample{endpoints: len(eps), images: map[string]int{}}
	for id, a := range attrs {
		if a["service"] != svc {
			continue
		}
		if a["state"] == "pending" || a["state"] == "running" {
			s.live++
		}
		if a["state"] == "running" && a["health"] == "healthy" && placed[id] {
			s.serving++
			s.images[a["image"]]++
		}
	}
	return s, nil
}

// bounds samples a service every 20 ms until stop and keeps the extremes.
type bounds struct {
	mu                                sync.Mutex
	maxLive, minServing, minEndpoints int
	samples                           int
}

func (c *cluster) watchService(svc string) (*bounds, func()) {
	b := &bounds{minServing: 1 << 30, minEndpoints: 1 << 30}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if s, err := c.sample(svc); err == nil {
				b.mu.Lock()
				b.samples++
				b.maxLive = max(b.maxLive, s.live)
				b.minServing = min(b.minServing, s.serving)
				b.minEndpoints = min(b.minEndpoints, s.endpoints)
				b.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return b, func() { close(done); wg.Wait() }
}

func (c *cluster) rollout(svc string) map[string]any {
	raw := c.get(facts.ServiceRollout(svc))
	if raw == "" {
		return nil
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		c.t.Fatalf("rollout of %s: %v", svc, err)
	}
	return v
}

// pluginStore returns a store whose schema has the plugin fact types
// registered under schema/ (the sim's knobs), apart from the process-wide
// default schema other tests count on.
func (c *cluster) pluginStore() *facts.Store {
	c.t.Helper()
	s := c.srv.dial(c.t)
	if err := s.LoadPlugins(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	return s
}

func writeService(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "svc.hcl")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const rolloutService = `service "web" {
  image     = %q
  instances = 6
  expose    = [8080]
  update {
    max_extra       = 1
    max_unavailable = 1
  }
}
`

func TestRollingUpdateEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "3", "--node-prefix", "n-")
	c.waitFor(20*time.Second, "three nodes hold leases", func() bool { return len(c.list("lease/node/")) == 3 })
	dir := t.TempDir()
	apply := func(image string) {
		t.Helper()
		if r := c.srv.ccattler(t, "apply", "-f", writeService(t, dir, fmt.Sprintf(rolloutService, image))); r.code != 0 {
			t.Fatalf("apply %s: %s", image, r.stderr)
		}
	}
	apply("web:1")
	c.waitFor(30*time.Second, "6 instances of web:1 serving", func() bool {
		s, err := c.sample("web")
		return err == nil && s.images["web:1"] == 6 && s.endpoints == 6 && s.live == 6
	})

	t.Run("image change: one at a time, within the limits, all new at the end", func(t *testing.T) {
		b, stop := c.watchService("web")
		start := time.Now()
		apply("web:2")
		c.waitFor(60*time.Second, "6 instances of web:2 serving, nothing else live, the rollout's view gone", func() bool {
			s, err := c.sample("web")
			return err == nil && s.images["web:2"] == 6 && s.live == 6 && s.endpoints == 6 && c.rollout("web") == nil
		})
		took := time.Since(start)
		stop()
		t.Logf("rollout of 6 instances took %s; %d samples: at most %d live, at least %d serving, at least %d endpoints",
			took.Round(time.Millisecond), b.samples, b.maxLive, b.minServing, b.minEndpoints)
		if b.maxLive > 7 {
			t.Errorf("%d instances live at once, want at most 7 (6 + max_extra 1)", b.maxLive)
		}
		if b.minServing < 5 || b.minEndpoints < 5 {
			t.Errorf("only %d running and healthy (%d endpoints) at one moment, want at least 5 (6 - max_unavailable 1)",
				b.minServing, b.minEndpoints)
		}
		r := c.srv.ccattler(t, "get", "services")
		if !regexp.MustCompile(`(?m)^web\s+web:2\s.*\s6/6\s+-\s+-\s+-\s+-\s*$`).MatchString(r.stdout) {
			t.Errorf("get services does not show web at 6/6 on web:2:\n%s", r.stdout)
		}
	})

	t.Run("an image whose health check fails: the rollout halts, the old ones keep serving", func(t *testing.T) {
		b, stop := c.watchService("web")
		apply("web:3-unhealthy")
		var halted map[string]any
		c.waitFor(30*time.Second, "the rollout halted", func() bool {
			halted = c.rollout("web")
			return halted != nil && halted["state"] == "halted"
		})
		time.Sleep(3 * time.Second) // give the rules every chance to go on
		stop()
		s, err := c.sample("web")
		if err != nil {
			t.Fatal(err)
		}
		if s.images["web:2"] < 5 || s.endpoints < 5 {
			t.Errorf("%d instances of web:2 serving (%d endpoints) after the halt, want at least 5:\n%s", s.images["web:2"], s.endpoints, c.dump())
		}
		if b.maxLive > 7 || b.minServing < 5 {
			t.Errorf("during the failed rollout: at most %d live (want <= 7), at least %d serving (want >= 5)", b.maxLive, b.minServing)
		}
		if !strings.Contains(fmt.Sprint(halted["reason"]), "web:3-unhealthy failed or are unhealthy") {
			t.Errorf("the halted rollout's reason = %q", halted["reason"])
		}
		evs, _, _, err := audit.List(context.Background(), c.store, audit.Filter{Rule: "rollout_status"})
		if err != nil {
			t.Fatal(err)
		}
		said := false
		for _, ev := range evs {
			for _, w := range ev.Writes {
				said = said || strings.Contains(string(w.Value), `"halted"`)
			}
		}
		if !said {
			t.Errorf("no rollout_status record says the rollout halted (%d records)", len(evs))
		}
		if r := c.srv.ccattler(t, "get", "services"); !regexp.MustCompile(`(?m)^web\s.*\s0/6\s+halted\s`).MatchString(r.stdout) {
			t.Errorf("get services does not show the halted rollout:\n%s", r.stdout)
		}
	})

	t.Run("rolling back resumes: the unhealthy instance is replaced", func(t *testing.T) {
		apply("web:2")
		c.waitFor(60*time.Second, "6 instances of web:2 serving and nothing else live", func() bool {
			s, err := c.sample("web")
			return err == nil && s.images["web:2"] == 6 && s.live == 6 && c.rollout("web") == nil
		})
	})

	t.Run("a changed cpu request rolls out the same way", func(t *testing.T) {
		b, stop := c.watchService("web")
		withCPU := strings.Replace(fmt.Sprintf(rolloutService, "web:2"), "  expose", "  resources {\n    cpu = 0.5\n  }\n  expose", 1)
		if r := c.srv.ccattler(t, "apply", "-f", writeService(t, dir, withCPU)); r.code != 0 {
			t.Fatalf("apply: %s", r.stderr)
		}
		c.waitFor(60*time.Second, "6 instances started with 0.5 cpu serving, nothing else live", func() bool {
			s, err := c.sample("web")
			if err != nil || s.serving != 6 || s.live != 6 || c.rollout("web") != nil {
				return false
			}
			for _, in := range c.running() {
				if c.get(facts.InstanceCPU(in.id)) != "0.5" {
					return false
				}
			}
			return true
		})
		stop()
		if b.maxLive > 7 || b.minServing < 5 {
			t.Errorf("during the resources rollout: at most %d live (want <= 7), at least %d serving (want >= 5)", b.maxLive, b.minServing)
		}
	})
}

func TestHealthReplacementEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "2", "--node-prefix", "n-")
	c.waitFor(20*time.Second, "two nodes hold leases", func() bool { return len(c.list("lease/node/")) == 2 })
	web := writeService(t, t.TempDir(), `service "web" {
  image     = "web:1"
  instances = 3
  expose    = [8080]
  health {
    failures = 2
    interval = "2s"
  }
}
`)
	if r := c.srv.ccattler(t, "apply", "-f", web); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	c.waitFor(30*time.Second, "3 endpoints", func() bool { return len(c.list("endpoint/service/web/")) == 3 })
	victim := c.running()[0].id

	// The sim's knob: the instance reports unhealthy from now on, through its agent.
	c.waitFor(10*time.Second, "the sim's health knob registered", func() bool {
		return c.get(facts.SchemaKey(sim.HealthFactType)) != ""
	})
	if _, err := c.pluginStore().PutValue(context.Background(), sim.HealthKey(victim), "unhealthy"); err != nil {
		t.Fatal(err)
	}
	c.waitFor(10*time.Second, "the instance reported unhealthy by its agent, its endpoint removed", func() bool {
		return c.get(facts.InstanceHealth(victim)) == `"unhealthy"` && c.get(facts.Endpoint("web", victim)) == ""
	})
	if c.get(facts.InstanceRetiring(victim)) != "" {
		t.Errorf("%s retiring at its first failed check; want it after 2 checks 2s apart", victim)
	}
	b, stop := c.watchService("web")
	c.waitFor(20*time.Second, "the unhealthy instance replaced: stopped, 3 others serving", func() bool {
		s, err := c.sample("web")
		return err == nil && s.serving == 3 && s.live == 3 && c.get(facts.InstanceState(victim)) == `"stopped"`
	})
	stop()
	if got := c.get(facts.InstanceRetiring(victim)); got != `"unhealthy"` {
		t.Errorf("%s retiring = %s, want \"unhealthy\"", victim, got)
	}
	if b.maxLive > 4 {
		t.Errorf("%d instances live at once, want at most 4 (3 + the default max_extra 1)", b.maxLive)
	}
	if b.minServing < 2 {
		t.Errorf("only %d serving at one moment, want the 2 healthy ones throughout", b.minServing)
	}
	if _, ok := c.list("endpoint/service/web/")[facts.Endpoint("web", victim)]; ok {
		t.Errorf("the replaced instance %s still has an endpoint", victim)
	}
}
