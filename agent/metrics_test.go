package agent_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestMetricsOnTheirOwnLease checks that reported metrics hang on a short
// lease of their own, so that a dead agent's metrics expire instead of
// steering the autoscaler, and that a stopped container's metric goes.
func TestMetricsOnTheirOwnLease(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	cfg := sim.NewConfig()
	cfg.StartDelay = 0
	fleet, err := sim.NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := fleet.Node("sim-0001")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, id := range []string{"a0001", "a0002"} {
		if _, err := rt.Start(ctx, agent.Spec{ID: id, Service: "web", Image: "web:1"}); err != nil {
			t.Fatal(err)
		}
	}
	fleet.SetLoad("web", 1)
	m := &agent.Metrics{Store: s, Interval: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler),
		Nodes: []agent.NodeConfig{{ID: "sim-0001", Runtime: rt}}}
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()

	key := facts.ServiceMetric("web", "cpu", "a0001")
	var lease facts.LeaseID
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f, ok, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if ok && string(f.Value) == "0.5" {
			lease = facts.LeaseID(f.Lease)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not reported as 0.5 within 10s", key)
		}
	}
	if lease == 0 {
		t.Fatal("the metric is not on a lease")
	}
	_, granted, err := s.LeaseTTL(ctx, lease)
	if err != nil {
		t.Fatal(err)
	}
	if granted < time.Second || granted > 5*time.Second {
		t.Errorf("metrics lease TTL %s, want a few seconds (3 intervals, at least 5s)", granted)
	}

	if err := rt.Stop(ctx, "a0002", 0); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		a1, _, _ := s.Get(ctx, key)
		_, ok, _ := s.Get(ctx, facts.ServiceMetric("web", "cpu", "a0002"))
		if string(a1.Value) == "1" && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a stopped container's metric was not deleted, or the load not moved to the other one")
		}
	}
	cancel()
	<-done
}
