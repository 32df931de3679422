package sim

import (
	"context"
	"log/slog"
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
