// Package sim is the runtime of simulated nodes (like kubemark's hollow
// nodes): the agent's own code, with containers held in memory, so that one
// process can run thousands of nodes for scale tests.
//
//	fleet, _ := sim.NewFleet(sim.NewConfig())
//	nodes := []agent.NodeConfig{{ID: "sim-0001", CPU: 4, Memory: 8 << 30,
//		Architecture: "amd64", Zone: "sim-1", Runtime: fleet.Node("sim-0001")}}
//	a, _ := agent.New(cfg, nodes)
//	a.Run(ctx)
//
// A start takes Config.StartDelay and fails with probability
// Config.FailureRate; a started instance reports healthy, or unhealthy with
// probability Config.Unhealthy; an instance of an image whose name contains
// "unhealthy" (UnhealthyImage) always reports unhealthy, so a test can roll
// out a version whose health checks fail; one whose name contains
// "unpullable" (UnpullableImage) never starts, as an image that cannot be
// pulled. With Config.HostNetwork a node's instances share one address and
// a start fails when another running instance of the node holds one of its
// ports, as with containerd's host networking. Addresses come in order from
// Config.Range and are never dialled. Fleet.Exit makes a container die, to
// exercise failure reporting. Draws are seeded (Config.Seed), so a run can be
// replayed.
//
// Knobs (knobs.go), set while the fleet runs through plugin facts that
// Fleet.Follow registers and watches: a service's synthetic cpu load
// (sim/service/{name}/load, or SetLoad), shared evenly by its running
// instances and reported as their usage; an instance's health from now on
// (sim/instance/{id}/health, or SetHealth).
package sim
