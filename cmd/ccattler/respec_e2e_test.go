package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

const respecService = `service "greet" {
  image     = "busybox:1"
  instances = 3
  expose    = [8080]
  command   = ["/bin/sh", "-c"]
  args      = ["echo $GREETING"]
  env       = { GREETING = %q }
  update {
    max_extra       = 1
    max_unavailable = 0
  }
}
`

// A changed env is a rolling update: the instances are replaced one by one
// within update/max_extra and max_unavailable, and every new one runs with
// the new env (the sim's log of each instance says what it was started with,
// read through ccattler logs). A re-apply of the same file replaces nothing.
func TestEnvChangeRollsEndToEnd(t *testing.T) {
	c := newCluster(t)
	addr := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	c.agent("fleet", "--nodes", "3", "--node-prefix", "r-", "--logs-address", addr)
	c.waitFor(20*time.Second, "three nodes hold leases", func() bool { return len(c.list("lease/node/")) == 3 })
	dir := t.TempDir()
	c.apply(dir, "greet.hcl", fmt.Sprintf(respecService, "hello"))
	serving := func() []instance {
		var out []instance
		for _, in := range c.of("greet") {
			if in.state == "running" && in.health == "healthy" && in.placed != "" {
				out = append(out, in)
			}
		}
		return out
	}
	var first []instance
	c.waitFor(30*time.Second, "3 instances of greet serving", func() bool {
		first = serving()
		s, err := c.sample("greet")
		return err == nil && len(first) == 3 && s.live == 3 && s.endpoints == 3
	})
	digest := func() string { return c.get(facts.ServiceSpecDigest("greet")) }
	d1 := digest()
	if d1 == "" {
		t.Fatal("apply wrote no spec_digest for a service with command, args and env")
	}
	for _, in := range first {
		if got := c.get(facts.InstanceSpecDigest(in.id)); got != d1 {
			t.Fatalf("instance %s reports spec_digest %s, want the service's %s", in.id, got, d1)
		}
	}

	// The same file again: same digest, nothing replaced.
	c.apply(dir, "greet.hcl", fmt.Sprintf(respecService, "hello"))
	time.Sleep(time.Second) // a replacement would have started within a round
	if got := digest(); got != d1 {
		t.Fatalf("re-applying the same file changed the digest %s -> %s", d1, got)
	}
	if s, err := c.sample("greet"); err != nil || s.live != 3 || c.rollout("greet") != nil {
		t.Fatalf("re-applying the same file started a rollout: %+v %v, rollout %v", s, err, c.rollout("greet"))
	}

	b, stop := c.watchService("greet")
	start := time.Now()
	c.apply(dir, "greet.hcl", fmt.Sprintf(respecService, "bonjour"))
	d2 := digest()
	if d2 == "" || d2 == d1 {
		t.Fatalf("a changed env left the digest %s (was %s)", d2, d1)
	}
	old := map[string]bool{}
	for _, in := range first {
		old[in.id] = true
	}
	var now []instance
	c.waitFor(60*time.Second, "3 new instances serving with the new digest, nothing else live, the rollout's view gone", func() bool {
		now = serving()
		s, err := c.sample("greet")
		if err != nil || len(now) != 3 || s.live != 3 || s.endpoints != 3 || c.rollout("greet") != nil {
			return false
		}
		for _, in := range now {
			if old[in.id] || c.get(facts.InstanceSpecDigest(in.id)) != d2 {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	stop()
	t.Logf("env rollout of 3 instances took %s; %d samples: at most %d live, at least %d serving, at least %d endpoints",
		took.Round(time.Millisecond), b.samples, b.maxLive, b.minServing, b.minEndpoints)
	if b.maxLive > 4 {
		t.Errorf("%d instances live at once, want at most 4 (3 + max_extra 1)", b.maxLive)
	}
	if b.minServing < 3 || b.minEndpoints < 3 {
		t.Errorf("only %d serving (%d endpoints) at one moment, want 3 throughout (max_unavailable 0)", b.minServing, b.minEndpoints)
	}
	for _, in := range now {
		r := c.srv.ccattler(t, "logs", in.id)
		if r.code != 0 || !strings.Contains(r.stdout, `env ["GREETING=bonjour"]`) {
			t.Errorf("ccattler logs %s (a new instance): exit %d, want env GREETING=bonjour\n%s%s", in.id, r.code, r.stdout, r.stderr)
		}
	}
	// Each replacement is recorded: stop_replaced fired once per old instance.
	if evs := mustEvents(t, c, "stop_replaced"); len(evs) != 3 {
		t.Errorf("stop_replaced fired %d times, want 3 (one per old instance)", len(evs))
	}
}
