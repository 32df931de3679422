// Package embedded runs an etcd member in-process: `ccattler server` with
// no --etcd, one member of a cluster of servers, and the tests' etcd
// (package etcdtest). It is apart from package facts so that what only
// reads and writes facts (rules, engine/eval, agents) links no etcd server.
//
//	cfg := embedded.NewConfig()
//	cfg.DataDir = dir
//	etcd, err := embedded.Start(cfg) // returns once the member serves
//	store, err := facts.Dial(ctx, facts.StoreConfig{Endpoints: etcd.Endpoints()})
//	defer etcd.Close()
package embedded
