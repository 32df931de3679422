package engine_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/ccattler/ccattler/rules"
)

// The engine runs a rule set on a mirror of etcd and commits what it
// concludes, each write with its firing record.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// An etcd of our own, as `ccattler server` embeds one.
	dir, _ := os.MkdirTemp("", "engine-example")
	defer os.RemoveAll(dir)
	ec := embedded.NewConfig()
	addrs := freeAddrs(2)
	ec.DataDir, ec.ClientURL, ec.PeerURL = dir, "http://"+addrs[0], "http://"+addrs[1]
	etcd, err := embedded.Start(ec)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer etcd.Close()
	store, _ := facts.Dial(ctx, facts.StoreConfig{Endpoints: etcd.Endpoints(), Schema: facts.NewSchema()})
	defer store.Close()

	// The mirror the engine reads, kept current by a watch.
	mirror := facts.NewMirror(store, nil)
	mirror.Sync(ctx)
	go mirror.Run(ctx)

	rs, diags := rules.LoadFiles(map[string][]byte{"intent.hcl": []byte(`
rule "resolve_intent" {
  doc       = "The effective instance count is the user's."
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}`)}, rules.WithSchema(store.Schema))
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	cfg := engine.NewConfig()
	cfg.Identity = "server-1"
	eng, _ := engine.New(store, mirror, engine.NewRuleSetEvaluator(rs, nil), cfg)
	done := make(chan struct{})
	go func() { defer close(done); eng.Run(ctx) }() // leads once elected
	defer func() { cancel(); <-done }()

	store.PutValue(ctx, facts.Intent("user", "web"), 3)
	for eng.Stats().Firings == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	f, _, _ := store.Get(ctx, facts.EffectiveInstances("web"))
	recs, _, _ := store.List(ctx, "event/", 0)
	fmt.Printf("%s = %s\n", f.Key, f.Value)
	fmt.Printf("%d record, at the same revision: %v\n", len(recs), recs[0].ModRevision == f.ModRevision)
	// Output:
	// effective/service/web/instances = 3
	// 1 record, at the same revision: true
}

// freeAddrs returns n loopback addresses that were free a moment ago, each
// different: the listeners stay open until all are taken, as the kernel
// may offer a port just closed again.
func freeAddrs(n int) []string {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}
