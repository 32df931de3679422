package access_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestKeeperFollowsTheFacts: the keeper turns auth/ facts and services into
// etcd's access as they change — a new principal is let in, a new service's
// metrics prefix reaches the nodes, invalid or removed rules revoke.
func TestKeeperFollowsTheFacts(t *testing.T) {
	e := etcdtest.StartSecure(t)
	root := e.StoreAs(t, access.Root)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := facts.NewMirror(root, slog.New(slog.DiscardHandler))
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _ = m.Run(ctx) }()
	k := &access.Keeper{Admin: root, Mirror: m, Root: root.Root, Debounce: 20 * time.Millisecond}
	done := make(chan struct{})
	go func() { k.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	rules, err := access.Default("node:node-9", ctl, leader)
	if err != nil {
		t.Fatal(err)
	}
	setRaw := func(key, val string) {
		t.Helper()
		if _, err := root.Client.Put(ctx, root.Abs(key), val); err != nil {
			t.Fatal(err)
		}
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10s: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	setRaw("auth/node:node-9/rules", string(rules.Encode()))
	var node9 *facts.Store
	eventually("node-9 admitted", func() bool {
		s, err := e.DialAs("node:node-9")
		if err != nil {
			return false
		}
		if put(s, "observed/node/node-9/state") != nil {
			s.Close()
			return false
		}
		node9 = s
		return true
	})
	defer node9.Close()

	if err := put(node9, "observed/service/db/metrics/cpu/abcde"); !denied(err) {
		t.Fatalf("metrics of a service that does not exist: %v; want denied", err)
	}
	setRaw("desired/service/db", "{}")
	eventually("db's metrics writable by node-9", func() bool { return put(node9, "observed/service/db/metrics/cpu/abcde") == nil })

	setRaw("auth/node:node-9/rules", `[{"prefix": "observed/", "access": "everything"}]`)
	eventually("node-9 revoked by invalid rules", func() bool { return put(node9, "observed/node/node-9/state") != nil })
}
