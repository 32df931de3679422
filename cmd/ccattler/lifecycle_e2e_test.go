package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// The service lifecycle end to end, with the real binary and simulated
// nodes: a deleted service is gone, a crash loop backs off, ports are a
// per-node resource on nodes that share their network.

func (c *cluster) apply(dir, name, body string) {
	c.t.Helper()
	if r := c.srv.ccattler(c.t, "apply", "-f", writeFile(c.t, dir, name, body)); r.code != 0 {
		c.t.Fatalf("apply %s: %s", name, r.stderr)
	}
}

// of returns the instances of one service.
func (c *cluster) of(svc string) []instance {
	var out []instance
	for _, in := range c.instances() {
		if in.service == svc {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func TestDeleteServiceEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "3", "--node-prefix", "n-")
	c.waitFor(20*time.Second, "three nodes hold leases", func() bool { return len(c.list("lease/node/")) == 3 })
	dir := t.TempDir()
	c.apply(dir, "web.hcl", `service "web" {
  image     = "nginx:1.28"
  instances = 5
  expose    = [8080]
}
`)
	c.waitFor(30*time.Second, "5 instances of web running, 5 endpoints", func() bool {
		n := 0
		for _, in := range c.of("web") {
			if in.state == "running" && in.placed != "" {
				n++
			}
		}
		return n == 5 && len(c.list("endpoint/service/web/")) == 5
	})

	start := time.Now()
	if r := c.srv.ccattler(t, "delete", "service", "web"); r.code != 0 {
		t.Fatalf("delete: %s", r.stderr)
	}
	c.waitFor(5*time.Second, "no placement, no endpoint, no running instance of web", func() bool {
		for _, in := range c.of("web") {
			if in.placed != "" || in.state == "running" || in.state == "pending" {
				return false
			}
		}
		return len(c.list("endpoint/service/web/")) == 0 && c.get(facts.EffectiveInstances("web")) == ""
	})
	t.Logf("deleted within %s", time.Since(start).Round(time.Millisecond))
	if n := len(c.of("web")); n != 5 {
		t.Errorf("%d instances of web in the facts, want the 5 stopped ones kept as history", n)
	}

	// An instance of the deleted service reported pending (a late or
	// hostile writer) is cancelled and never placed.
	if _, err := c.store.PutValue(context.Background(), facts.InstanceService("abcde"), "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.store.PutValue(context.Background(), facts.InstanceState("abcde"), "pending"); err != nil {
		t.Fatal(err)
	}
	c.waitFor(5*time.Second, "the stray pending instance cancelled", func() bool {
		return c.get(facts.InstanceState("abcde")) == `"stopped"`
	})
	time.Sleep(2 * time.Second) // several engine rounds and agent reports
	for _, in := range c.of("web") {
		if in.placed != "" || in.state == "running" {
			t.Errorf("after the delete: %+v", in)
		}
	}
	for _, ev := range mustEvents(t, c, "schedule") {
		if at, _ := facts.EventTime(ev.ID); ev.Bindings["svc"] == "web" && at.After(start) {
			t.Errorf("an instance of the deleted service was placed: %+v", ev)
		}
	}
}

func mustEvents(t *testing.T, c *cluster, rule string) []audit.Event {
	t.Helper()
	evs, _, _, err := audit.List(context.Background(), c.store, audit.Filter{Rule: rule})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestCrashLoopBacksOffEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "2", "--node-prefix", "n-")
	c.waitFor(20*time.Second, "two nodes hold leases", func() bool { return len(c.list("lease/node/")) == 2 })
	dir := t.TempDir()
	const svc = `service "web" {
  image     = %q
  instances = 1
  expose    = [8080]
}
`
	start := time.Now()
	c.apply(dir, "web.hcl", fmt.Sprintf(svc, "web:1-unpullable"))
	const window = 40 * time.Second
	time.Sleep(window)

	// Every failure the restart policy counted is a firing of count_failure,
	// with the agent's reason among its bindings.
	var at []time.Time
	for _, ev := range mustEvents(t, c, "count_failure") {
		if ev.Bindings["svc"] != "web" {
			continue
		}
		if !strings.Contains(ev.Bindings["reason"], "could not be pulled") {
			t.Errorf("count_failure without the agent's reason: %v", ev.Bindings)
		}
		ts, err := time.Parse(time.RFC3339Nano, ev.Bindings["failed"])
		if err != nil {
			t.Fatalf("failed %q: %v", ev.Bindings["failed"], err)
		}
		at = append(at, ts)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	var gaps []string
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]).Round(100*time.Millisecond).String())
	}
	t.Logf("%d attempts in %s, gaps %s", len(at), window, strings.Join(gaps, " "))
	// 1 s doubling: failures at about 0, 1, 3, 7, 15, 31 s.
	if len(at) < 4 || len(at) > 8 {
		t.Errorf("%d failures in %s, want 4 to 8 (exponential backoff from 1s)", len(at), window)
	}
	// Each retry waits its delay (1s, 2s, 4s, ...) from the failure's
	// whole second (restart.hcl stamps the hold in whole seconds), so at
	// least the delay less a second; a loaded machine may add to a gap,
	// never take from it, so the gaps are held to the schedule rather than
	// to each other.
	for i := 1; i < len(at); i++ {
		delay := time.Second << (i - 1)
		if cur := at[i].Sub(at[i-1]); cur < delay-time.Second {
			t.Errorf("gap %d (%s) is shorter than its delay %s: gaps %v", i, cur, delay, gaps)
		}
	}
	if n := len(at); n >= 4 && at[n-1].Sub(at[n-2]) < 3*at[1].Sub(at[0]) {
		t.Errorf("the backoff did not grow: gaps %v", gaps)
	}
	if n := len(c.of("web")); n > 6 {
		t.Errorf("%d instances of web kept, want at most the 5 newest failed and one more", n)
	}
	for _, ev := range mustEvents(t, c, "note_failed") {
		if ev.Bindings["reason"] == "" {
			t.Errorf("note_failed without the reason: %v", ev.Bindings)
		}
	}
	r := c.srv.ccattler(t, "get", "services")
	if !regexp.MustCompile(`(?m)^web\s.*\sfailing\s+\d+\s+start: sim: image web:1-unpullable is not imported and could not be pulled`).MatchString(r.stdout) {
		t.Errorf("get services does not show web failing with the reason:\n%s", r.stdout)
	}
	r = c.srv.ccattler(t, "events", "--rule", "note_failed")
	if !strings.Contains(r.stdout, "could not be pulled") {
		t.Errorf("ccattler events --rule note_failed does not show the reason:\n%s", r.stdout)
	}

	// Fixing the image recovers it at once, without waiting out the backoff
	// (the hold is 32 s by now).
	fixed := time.Now()
	c.apply(dir, "web.hcl", fmt.Sprintf(svc, "web:1"))
	c.waitFor(15*time.Second, "web running on the fixed image", func() bool {
		for _, in := range c.of("web") {
			if in.state == "running" && in.placed != "" {
				return true
			}
		}
		return false
	})
	t.Logf("recovered %s after the fix (%s after the first apply)", time.Since(fixed).Round(time.Millisecond), time.Since(start).Round(time.Second))
	r = c.srv.ccattler(t, "get", "services")
	if strings.Contains(r.stdout, "failing") {
		t.Errorf("get services still shows web failing once it runs:\n%s", r.stdout)
	}
}

func TestPortFilterEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("a", "--nodes", "1", "--node-prefix", "a-", "--sim-host-network")
	c.waitFor(20*time.Second, "node a-0001 holds its lease and says it shares its network", func() bool {
		return len(c.list("lease/node/")) == 1 && c.get(facts.NodeNetwork("a-0001")) == `"host"`
	})
	dir := t.TempDir()
	c.apply(dir, "one.hcl", `service "one" {
  image     = "one:1"
  instances = 1
  expose    = [8080]
}
`)
	c.waitFor(20*time.Second, "one running", func() bool {
		in := c.of("one")
		return len(in) == 1 && in[0].state == "running"
	})
	c.apply(dir, "two.hcl", `service "two" {
  image     = "two:1"
  instances = 1
  expose    = [8080]
}
`)
	var pending string
	c.waitFor(20*time.Second, "two pending, unplaced", func() bool {
		in := c.of("two")
		if len(in) == 1 && in[0].state == "pending" && in[0].placed == "" {
			pending = in[0].id
			return true
		}
		return false
	})
	var r result
	c.waitFor(10*time.Second, "a rejection recorded for "+pending, func() bool {
		r = c.srv.ccattler(t, "why-not", "instance", pending)
		return r.code == 0
	})
	if !regexp.MustCompile(`a-0001\s+rejected by port\b`).MatchString(r.stdout) {
		t.Errorf("why-not instance %s does not name the port filter:\n%s", pending, r.stdout)
	}
	time.Sleep(time.Second)
	for _, in := range c.instances() {
		if in.state == "failed" {
			t.Errorf("an instance failed: %+v (the clash should have kept it pending)", in)
		}
	}

	c.agent("b", "--nodes", "1", "--node-prefix", "b-", "--sim-host-network")
	c.waitFor(20*time.Second, "two placed on b-0001 and running", func() bool {
		in := c.of("two")
		return len(in) == 1 && in[0].placed == "b-0001" && in[0].state == "running"
	})
}

func TestLogsAndCommandEndToEnd(t *testing.T) {
	c := newCluster(t)
	addr := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	c.agent("a", "--nodes", "1", "--node-prefix", "a-", "--logs-address", addr)
	c.waitFor(20*time.Second, "node a-0001 says where its logs are", func() bool {
		return c.get(facts.NodeLogs("a-0001")) == fmt.Sprintf("%q", addr)
	})
	dir := t.TempDir()
	c.apply(dir, "hello.hcl", `service "hello" {
  image     = "busybox:1"
  instances = 1
  command = ["/bin/sh", "-c"]
  args    = ["echo \"$GREETING from $PORT\""]
  env     = { GREETING = "hello world" }
  expose  = [8080]
}
`)
	var id string
	c.waitFor(20*time.Second, "hello running", func() bool {
		in := c.of("hello")
		if len(in) == 1 && in[0].state == "running" {
			id = in[0].id
			return true
		}
		return false
	})
	r := c.srv.ccattler(t, "logs", id)
	if r.code != 0 || !strings.Contains(r.stdout, `command ["/bin/sh" "-c"]`) || !strings.Contains(r.stdout, `env ["GREETING=hello world"]`) {
		t.Errorf("ccattler logs %s: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct{ id, want string }{
		{"fffff", "no instance fffff"},
		{"NOTHEX", "not a valid instance-id"},
	} {
		if r := c.srv.ccattler(t, "logs", tc.id); r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("logs %s: exit %d, stderr %q, want %q", tc.id, r.code, r.stderr, tc.want)
		}
	}
	// A node that serves no logs says how to make it.
	if _, err := c.store.PutValue(context.Background(), facts.Placement("abcde"), "b-0001"); err != nil {
		t.Fatal(err)
	}
	if r := c.srv.ccattler(t, "logs", "abcde"); r.code == 0 || !strings.Contains(r.stderr, "--logs-address") {
		t.Errorf("logs of an instance on a node without logs: exit %d, %q", r.code, r.stderr)
	}
}

// delete of several objects, by name or by file, in one transaction: a
// name without facts deletes nothing unless passed over; --wait returns
// once the services' instances stopped and their endpoints went, and says
// so on stderr.
func TestDeleteManyEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "2", "--node-prefix", "n-")
	c.waitFor(20*time.Second, "two nodes hold leases", func() bool { return len(c.list("lease/node/")) == 2 })
	dir := t.TempDir()
	file := writeFile(t, dir, "stack.hcl", `service "web" {
  image     = "nginx:1.28"
  instances = 3
  expose    = [8080]
}
service "api" {
  image     = "api:1"
  instances = 2
}
service "db" {
  image  = "postgres:17"
  volume = "data"
}
volume "data" { size = "1Gi" }
`)
	// db sets no count: apply warns, and --wait does not wait for one.
	if r := c.srv.ccattler(t, "apply", "-f", file, "--wait", "--timeout", "60s"); r.code != 0 ||
		!strings.Contains(r.stderr, "stack.hcl:10:9: warning: No instances") || !strings.Contains(r.stderr, "db: 0/0 running, 0 healthy\n") {
		t.Fatalf("apply --wait: exit %d: %s", r.code, r.stderr)
	}
	desired := func() int { return len(c.list("desired/service/")) + len(c.list("desired/volume/")) }
	before := desired()

	for _, bad := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"service", "web", "nope"}, 1, `service "nope" not found: nothing under desired/service/nope; nothing was deleted`},
		{[]string{"volume", "data"}, 1, `Volume "data" is used by service "db"`},
		{[]string{"service", "web", "-f", file}, 2, "give KIND NAME... or -f FILE, not both"},
		{[]string{"service"}, 2, "expected KIND NAME..."},
		{[]string{"service", "Web!"}, 2, "delete service"},
	} {
		r := c.srv.ccattler(t, append([]string{"delete"}, bad.args...)...)
		if r.code != bad.code || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("delete %v: exit %d, stderr %q; want %d and %q", bad.args, r.code, r.stderr, bad.code, bad.want)
		}
	}
	if n := desired(); n != before {
		t.Fatalf("refused deletes left %d desired facts of %d", n, before)
	}

	// An instance of api that no agent runs, reported running by a stray
	// writer: nothing stops it, and --wait says so at its deadline.
	for k, v := range map[string]string{facts.InstanceService("fffff"): "api", facts.InstanceState("fffff"): "running", facts.InstanceNode("fffff"): "n-gone"} {
		if _, err := c.store.PutValue(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.srv.ccattler(t, "delete", "service", "api", "--wait", "--timeout", "3s"); r.code != 1 ||
		!strings.Contains(r.stderr, "error: --wait: not stopped within 3s: api: 1 instance pending or running, 0 endpoints (ccattler get instances shows them)") {
		t.Fatalf("delete --wait of a service whose instance nothing stops: exit %d: %s", r.code, r.stderr)
	}
	if _, err := c.store.Remove(context.Background(), facts.InstanceState("fffff")); err != nil {
		t.Fatal(err)
	}
	if r := c.srv.ccattler(t, "apply", "-f", file); r.code != 0 {
		t.Fatalf("apply again: %s", r.stderr)
	}
	r := c.srv.ccattler(t, "delete", "-f", file, "--wait", "--timeout", "60s")
	if r.code != 0 || !strings.Contains(r.stdout, "- desired/volume/data (was {})") || !strings.Contains(r.stderr, "stopped: web, api, db\n") ||
		strings.Contains(r.stderr, "warning") { // db's count does not matter to its delete
		t.Fatalf("delete -f --wait: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !regexp.MustCompile(`(?m)  web: [1-3] instances? pending or running, [0-3] endpoints?$`).MatchString(r.stderr) ||
		!strings.Contains(r.stderr, "  web: 0 instances pending or running, 0 endpoints\n") {
		t.Errorf("delete --wait's progress:\n%s", r.stderr)
	}
	// Returned: nothing of them runs, nothing of them is desired.
	for _, svc := range []string{"web", "api", "db"} {
		for _, in := range c.of(svc) {
			if in.state == "running" || in.state == "pending" {
				t.Errorf("after delete --wait returned: %+v", in)
			}
		}
	}
	if eps := c.list("endpoint/service/"); len(eps) != 0 || desired() != 0 {
		t.Errorf("after delete --wait: endpoints %v, %d desired facts", eps, desired())
	}
	if r := c.srv.ccattler(t, "delete", "-f", file); r.code != 1 || !strings.Contains(r.stderr, `service "web" not found`) {
		t.Errorf("delete -f again: exit %d, %s", r.code, r.stderr)
	}
	if r := c.srv.ccattler(t, "delete", "-f", file, "--ignore-not-found"); r.code != 0 || r.stdout != "no changes\n" {
		t.Errorf("delete -f --ignore-not-found: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
}

// apply --wait and delete --wait of more than ten services report one line
// of totals, not a line per service each time one moves.
func TestWaitManyServicesEndToEnd(t *testing.T) {
	c := newCluster(t)
	c.agent("fleet", "--nodes", "2", "--node-prefix", "n-")
	c.waitFor(20*time.Second, "two nodes hold leases", func() bool { return len(c.list("lease/node/")) == 2 })
	var src strings.Builder
	for i := range 12 {
		fmt.Fprintf(&src, "service \"s%02d\" {\n  image     = \"nginx:1.28\"\n  instances = 1\n}\n", i)
	}
	file := writeFile(t, t.TempDir(), "many.hcl", src.String())
	r := c.srv.ccattler(t, "apply", "-f", file, "--wait", "--timeout", "60s")
	perService := regexp.MustCompile(`(?m)^[0-9:.]+  s[0-9]{2}: `)
	if r.code != 0 || !strings.HasSuffix(r.stderr, "  12 services: 12 converged\nconverged: 12 services\n") || perService.MatchString(r.stderr) {
		t.Fatalf("apply --wait of 12 services: exit %d:\n%s", r.code, r.stderr)
	}
	r = c.srv.ccattler(t, "delete", "-f", file, "--wait", "--timeout", "60s")
	if r.code != 0 || !strings.HasSuffix(r.stderr, "  12 services: 0 instances pending or running, 0 endpoints\nstopped: 12 services\n") {
		t.Fatalf("delete --wait of 12 services: exit %d:\n%s", r.code, r.stderr)
	}
	if perService.MatchString(r.stderr) {
		t.Errorf("delete --wait printed a line per service:\n%s", r.stderr)
	}
}
