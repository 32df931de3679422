// Package agent is the node agent: it registers a node, holds its lease,
// watches what is placed on it, runs it through a Runtime and reports what
// is real.
//
// A tour:
//
//   - agent.go   Config and NodeConfig (NewConfig defaults, Validate naming
//     the flag), Agent: one process, one or many nodes (simulated nodes share
//     everything below but their runtime).
//   - feed.go    the one mirror of the process (facts.NewMirrorOf) of its
//     nodes' entries placement/node/{node}/{id} (each names the instance's
//     service) and of desired/service/, fanned out to nodes by node id. A
//     process of one node watches that node's entries alone.
//   - node.go    the reconcile loop of one node: start what is placed on it,
//     stop what is not, never restart what exited (that is reported failed).
//     A pass runs when the feed or a start, stop, probe or lease pokes the
//     node, and at every --resync tick unless the runtime tells its version
//     (Versioner: the simulated one) and nothing the pass depends on changed
//     since the last one committed its report (at most 30 s).
//   - report.go  observed/ facts (a failure's reason and exit status too),
//     diffed against what was
//     last written and committed in batches; everything is rewritten after a
//     new lease or a reconnect.
//   - writer.go  group commit of all nodes' reports, and the link probe that
//     notices etcd coming back.
//   - lease.go   lease/node/{id} on a TTL lease, replaced when lost.
//   - health.go  GET/HEAD/TCP health checks against the instance's address.
//   - cache.go   the checksummed, atomically replaced cache under --state-dir.
//   - runtime.go the Runtime interface; agent/containerd and agent/sim
//     implement it.
//   - metrics.go each instance's cpu use, for the autoscaler, from runtimes
//     that are Metered, on a lease of its own.
//   - logs.go    LogServer: the containers' output over HTTP for
//     `ccattler logs`, from runtimes that are Logged.
//
// Partition rules (DESIGN §5, §7): losing etcd never stops or restarts a
// container. The agent starts or stops containers only on what etcd said;
// until the feed has listed etcd once (an agent started while cut off), it
// works from its cache and the runtime and only adopts. A corrupt cache is
// logged, reported as observed/node/{id}/cache_error once etcd answers (the
// failure policy records it), and changes nothing.
//
// Networking (agent/containerd): host networking with a port check. An
// instance shares the node's network namespace, listens on its service's
// first exposed port (passed as $PORT) and is reported at the node's
// --advertise-address. A start whose port is taken on the node fails with
// the port named. Chosen over a network namespace per instance on a CNI
// bridge because it needs no CNI plugins, bridge, iptables or address
// management on the node, and the reported address is reachable from other
// nodes without an overlay; the price is that two instances exposing the
// same port cannot share a node, and instances are not isolated from each
// other on the network. Simulated nodes hand out addresses from a range and
// never dial them.
//
// Health: per the service's health block (GET or HEAD of http://ip:port/path,
// 2xx/3xx healthy; TCP connect), every health/interval (default 10s), the
// first check half a second after start. Without a block: a TCP check of the
// first exposed port, or healthy while it runs if it exposes none.
//
// Least privilege: the agent writes only observed/ and its own
// lease/node/{id}, never event/ (the engine records what it reports); it reads
// placement/node/{id}/ and desired/service/.
//
//	cfg := agent.NewConfig()
//	cfg.Store, cfg.StateDir = store, "/var/lib/ccattler"
//	a, err := agent.New(cfg, []agent.NodeConfig{{ID: "node-1", CPU: 4, Memory: 8 << 30,
//		Architecture: "amd64", Zone: "eu-1a", Runtime: rt}})
//	if err != nil { ... }
//	a.Run(ctx) // until ctx is done; containers keep running after it returns
package agent
