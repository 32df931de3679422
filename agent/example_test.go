package agent_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
)

// One process running 1000 simulated nodes against an etcd that need not be
// up yet: the agent connects in the background and works from its cache meanwhile.
func Example_simulatedNodes() {
	store, err := agent.Connect([]string{"http://127.0.0.1:2379"}, "")
	if err != nil {
		log.Fatal(err)
	}
	fleet, err := sim.NewFleet(sim.NewConfig())
	if err != nil {
		log.Fatal(err)
	}
	cfg := agent.NewConfig()
	cfg.Store, cfg.StateDir, cfg.SyncCache = store, "/tmp/ccattler-sim", false
	nodes := simNodes(fleet, "sim-", 1000)
	a, err := agent.New(cfg, nodes)
	if err != nil {
		log.Fatal(err) // names the bad flag, e.g. --lease-ttl
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	a.Run(ctx) // containers (here: simulated ones) keep running after it returns
}
