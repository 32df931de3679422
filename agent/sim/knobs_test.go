package sim

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestHealthKnob turns a running instance unhealthy and back through its
// plugin fact: the runtime lists it with that health.
func TestHealthKnob(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	cfg := NewConfig()
	cfg.StartDelay = 0
	fleet, err := NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := fleet.Node("sim-0001")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := rt.Start(ctx, agent.Spec{ID: "a0001", Service: "web", Image: "web:1"}); err != nil {
		t.Fatal(err)
	}
	go fleet.Follow(ctx, s, slog.New(slog.DiscardHandler))
	health := func() string {
		l, err := rt.List(ctx)
		if err != nil || len(l) != 1 {
			t.Fatalf("list: %v %v", l, err)
		}
		return l[0].Health
	}
	waitHealth := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); health() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("health %q, want %q", health(), want)
			}
		}
	}
	waitHealth(agent.Healthy)
	for deadline := time.Now().Add(10 * time.Second); s.LoadPlugins(ctx) != nil || !hasType(s, HealthFactType); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sim.instance.health not registered")
		}
	}
	if _, err := s.PutValue(ctx, HealthKey("a0001"), "sideways"); err == nil {
		t.Error("a health outside healthy|unhealthy|unknown was accepted")
	}
	if _, err := s.PutValue(ctx, HealthKey("a0001"), agent.Unhealthy); err != nil {
		t.Fatal(err)
	}
	waitHealth(agent.Unhealthy)
	if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Delete(HealthKey("a0001"))}}); err != nil {
		t.Fatal(err)
	}
	waitHealth(agent.Healthy)
}

func hasType(s *facts.Store, name string) bool {
	_, ok := s.Schema.Type(name)
	return ok
}

// TestLoadToMetrics drives a service's synthetic load through its plugin
// fact and reads back the per-instance metrics the agent reports, on a real
// etcd.
func TestLoadToMetrics(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	cfg := NewConfig()
	cfg.StartDelay = 0
	fleet, err := NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := fleet.Node("sim-0001"), fleet.Node("sim-0002")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, sp := range []struct {
		rt      agent.Runtime
		id, svc string
	}{{n1, "a0001", "web"}, {n2, "a0002", "web"}, {n1, "b0001", "api"}} {
		if _, err := sp.rt.Start(ctx, agent.Spec{ID: sp.id, Service: sp.svc, Image: sp.svc + ":1"}); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	go fleet.Follow(ctx, s, log)
	m := &agent.Metrics{Store: s, Interval: 20 * time.Millisecond, Log: log, Nodes: []agent.NodeConfig{
		{ID: "sim-0001", Runtime: n1}, {ID: "sim-0002", Runtime: n2}}}
	go m.Run(ctx)

	get := func(key string) string {
		f, ok, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ""
		}
		return string(f.Value)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10s: %s", what)
			}
		}
	}
	waitFor("sim.service.load registered under schema/", func() bool { return get(facts.SchemaKey(LoadFactType)) != "" })
	if err := s.LoadPlugins(ctx); err != nil {
		t.Fatal(err)
	}
	web1, web2, api := facts.ServiceMetric("web", "cpu", "a0001"), facts.ServiceMetric("web", "cpu", "a0002"), facts.ServiceMetric("api", "cpu", "b0001")
	waitFor("idle instances report 0 cores", func() bool { return get(web1) == "0" && get(web2) == "0" && get(api) == "0" })

	if _, err := s.PutValue(ctx, LoadKey("web"), 1.5); err != nil {
		t.Fatal(err)
	}
	waitFor("web's 1.5 cores shared by its two instances on two nodes", func() bool {
		return get(web1) == "0.75" && get(web2) == "0.75" && get(api) == "0"
	})
	if _, err := s.PutValue(ctx, LoadKey("web"), "lots"); err == nil {
		t.Error("a load that is not a number was accepted by the registered type")
	}

	if err := n2.Stop(ctx, "a0002", 0); err != nil {
		t.Fatal(err)
	}
	waitFor("the remaining instance carries the load; the stopped one's metric is gone", func() bool {
		return get(web1) == "1.5" && get(web2) == ""
	})
	if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Delete(LoadKey("web"))}}); err != nil {
		t.Fatal(err)
	}
	waitFor("the load removed", func() bool { return get(web1) == "0" })
}

// knobState is the fleet's loads and health overrides, printed.
func knobState(f *Fleet) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprint(f.loads, f.health)
}

// eventually waits up to 20s for the fleet's knobs to read want.
func eventually(t *testing.T, f *Fleet, want string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); knobState(f) != want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("knobs %s, want %s", knobState(f), want)
		}
	}
}

// runKnobs runs k until the returned stop is called (or the test ends).
func runKnobs(t *testing.T, k *knobFollower) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func putRaw(t *testing.T, s *facts.Store, kv ...string) int64 {
	t.Helper()
	var rev int64
	for i := 0; i < len(kv); i += 2 {
		r, err := etcdtest.PutRaw(context.Background(), s, kv[i], kv[i+1])
		if err != nil {
			t.Fatal(err)
		}
		rev = r
	}
	return rev
}

// A knob set while the follower is behind, with the history it would
// need compacted away, is still picked up: the follower relists, and a
// knob deleted meanwhile goes too.
func TestKnobSetAfterACompactionIsPickedUp(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	fleet, err := NewFleet(NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	k := fleet.knobs(s, nil)
	stop := runKnobs(t, k)
	putRaw(t, s, LoadKey("web"), "1", LoadKey("api"), "0.5", HealthKey("a0001"), `"unhealthy"`)
	eventually(t, fleet, "map[api:0.5 web:1] map[a0001:unhealthy]")

	stop() // the follower falls behind...
	putRaw(t, s, LoadKey("web"), "2.5", HealthKey("b0002"), `"unknown"`)
	if _, err := s.Commit(context.Background(), facts.Txn{Ops: []facts.Op{facts.Delete(LoadKey("api"))}}); err != nil {
		t.Fatal(err)
	}
	rev := putRaw(t, s, HealthKey("a0001"), `"healthy"`)
	// ...and the history it would resume from is compacted away.
	if err := etcdtest.Compact(context.Background(), s, rev); err != nil {
		t.Fatal(err)
	}
	runKnobs(t, k)
	eventually(t, fleet, "map[web:2.5] map[a0001:healthy b0002:unknown]")
	if st, _ := k.mirror.Stats(); st.Relists < 2 {
		t.Errorf("relists = %d: the knobs were not relisted after the compaction", st.Relists)
	}
	// And it follows the watch again after the relist.
	putRaw(t, s, LoadKey("web"), "4")
	eventually(t, fleet, "map[web:4] map[a0001:healthy b0002:unknown]")
}

// A knob value its registered type rejects, written past the schema, is
// logged naming the key and leaves the last good setting; a good value
// after it is taken. A sim/ fact that is no knob is logged and ignored.
func TestBadKnobValueKeepsTheLastGoodOne(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	fleet, err := NewFleet(NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	var logs etcdtest.Logs
	runKnobs(t, fleet.knobs(s, logs.Logger()))
	putRaw(t, s, LoadKey("web"), "1.5", HealthKey("a0001"), `"unhealthy"`)
	const good = "map[web:1.5] map[a0001:unhealthy]"
	eventually(t, fleet, good)

	waitLog := func(want ...string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			found := false
			for _, line := range strings.Split(logs.String(), "\n") {
				all := true
				for _, w := range want {
					all = all && strings.Contains(line, w)
				}
				found = found || all
			}
			if found {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no log line with %q:\n%s", want, logs.String())
			}
		}
	}
	for _, bad := range []struct{ key, value, says string }{
		{LoadKey("web"), `"lots"`, "expected"},
		{LoadKey("web"), `-1`, "expected"},
		{LoadKey("web"), `{"cores": 2`, "not JSON"},
		{HealthKey("a0001"), `"sideways"`, "expected"},
		{HealthKey("a0001"), `3`, "expected"},
	} {
		putRaw(t, s, bad.key, bad.value)
		waitLog("keeping the last good one", "key="+bad.key, bad.says)
		if got := knobState(fleet); got != good {
			t.Errorf("after %s = %s the knobs are %s, want %s", bad.key, bad.value, got, good)
		}
	}
	putRaw(t, s, "sim/service/web/weight", "7")
	waitLog("no knob", "key=sim/service/web/weight")

	putRaw(t, s, LoadKey("web"), "3", HealthKey("a0001"), `"healthy"`)
	eventually(t, fleet, "map[web:3] map[a0001:healthy]")
}
