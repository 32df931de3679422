package access_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/facts/pki"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	ctl    = "/ccattler-ctl/"
	leader = "/ccattler-leader/"
)

// principals are the built-ins and a few of each kind, with default rules.
func principals(t *testing.T, extra ...string) map[string]access.Rules {
	t.Helper()
	out := access.Builtins(ctl, leader, []string{"effective/", "placement/", "endpoint/", "observed/", "intent/autoscaler/"})
	for _, p := range extra {
		r, err := access.Default(p, ctl, leader)
		if err != nil {
			t.Fatal(err)
		}
		// Through the value users write, so that Parse reads what Encode writes.
		if out[p], err = access.Parse(p, r.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func put(s *facts.Store, key string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Client.Put(ctx, s.Abs(key), `"x"`)
	return err
}

func get(s *facts.Store, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Client.Get(ctx, s.Abs(prefix), clientv3.WithPrefix())
	return err
}

func denied(err error) bool { return errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) }

// TestEtcdEnforcesTheTrustTable: with the plan synced into a real etcd with
// auth and mTLS, each principal's own certificate may do what the trust
// table says and nothing else.
func TestEtcdEnforcesTheTrustTable(t *testing.T) {
	e := etcdtest.StartSecure(t)
	root := e.StoreAs(t, access.Root)
	ctx := context.Background()
	ps := principals(t, "user:alice", "node:node-1", "node:node-2", "node:node-3", "node:sim-*")
	ch, err := access.Sync(ctx, root, access.Want(root.Root, ps, []string{"web"}))
	if err != nil {
		t.Fatal(err)
	}
	if ch.UsersAdded != len(ps) {
		t.Fatalf("sync: %s; want %d users added", ch, len(ps))
	}
	if again, err := access.Sync(ctx, root, access.Want(root.Root, ps, []string{"web"})); err != nil || !again.Zero() {
		t.Fatalf("second sync: %s, %v; want no change", again, err)
	}

	node2 := e.StoreAs(t, "node:node-2")
	for _, key := range []string{
		"desired/service/evil/image", "placement/instance/x", "placement/node/node-2/abcde", "effective/service/web/instances",
		"endpoint/service/web/abcde", "intent/user/service/web/instances", "auth/node:node-2/rules",
		"schema/evil", "observed/node/node-1/state", "lease/node/node-1", "event/20261201T000000.000000000Z-000001",
		"observed/node/node-20/state", "lease/node/node-20", "observed/service/web/rollout", "observed/clock",
	} {
		if err := put(node2, key); !denied(err) {
			t.Errorf("node-2 put %s: %v; want permission denied", key, err)
		}
	}
	// Through the store, whose Commit wraps etcd's refusal.
	if _, err := node2.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put("desired/service/evil/image", []byte(`"evil"`))}}); !access.IsDenied(err) {
		t.Errorf("node-2 commit desired/: %v; want a refusal IsDenied recognises", err)
	}
	for _, key := range []string{"observed/node/node-2", "observed/node/node-2/state", "lease/node/node-2",
		"observed/instance/abcde/state", "observed/volume/data/state", "observed/service/web/metrics/cpu/abcde"} {
		if err := put(node2, key); err != nil {
			t.Errorf("node-2 put %s: %v; want allowed", key, err)
		}
	}
	for _, p := range []string{"desired/service/", "placement/node/node-2/"} {
		if err := get(node2, p); err != nil {
			t.Errorf("node-2 read %s: %v; want allowed", p, err)
		}
	}
	// Its own placements only: not another node's entries (node-20's
	// begin with its id), nor every placement.
	for _, p := range []string{"auth/", "endpoint/", "lease/node/node-1", "", "placement/", "placement/instance/",
		"placement/node/", "placement/node/node-1/", "placement/node/node-20/", "placement/node/node-2"} {
		if err := get(node2, p); !denied(err) {
			t.Errorf("node-2 read %q: %v; want permission denied", p, err)
		}
	}

	fleet := e.StoreAs(t, "node:sim-*")
	if err := put(fleet, "observed/node/sim-0001/state"); err != nil {
		t.Errorf("fleet sim-* put its node's state: %v", err)
	}
	if err := put(fleet, "observed/node/node-1/state"); !denied(err) {
		t.Errorf("fleet sim-* put node-1's state: %v; want permission denied", err)
	}
	// A fleet reads its nodes' placements (the agent's feed watches the
	// prefix its ids share), no other node's.
	for p, allowed := range map[string]bool{"placement/node/sim-": true, "placement/node/sim-0001/": true,
		"placement/node/": false, "placement/node/node-1/": false} {
		if err := get(fleet, p); allowed && err != nil || !allowed && !denied(err) {
			t.Errorf("fleet sim-* read %s: %v; want allowed %v", p, err, allowed)
		}
	}

	alice := e.StoreAs(t, "user:alice")
	if err := put(alice, "desired/service/web/image"); err != nil {
		t.Errorf("alice put desired/: %v", err)
	}
	for _, key := range []string{"placement/instance/x", "auth/user:alice/rules", "effective/service/web/instances", "observed/node/node-1/state"} {
		if err := put(alice, key); !denied(err) {
			t.Errorf("alice put %s: %v; want permission denied", key, err)
		}
	}
	if err := get(alice, "auth/"); !denied(err) {
		t.Errorf("alice read auth/: %v; want permission denied", err)
	}
	if err := get(alice, "placement/"); err != nil {
		t.Errorf("alice read placement/: %v", err)
	}

	auditor := e.StoreAs(t, "auditor")
	for _, key := range []string{"desired/service/web/image", "observed/node/node-1/state", "event/x", "auth/x/rules"} {
		if err := put(auditor, key); !denied(err) {
			t.Errorf("auditor put %s: %v; want permission denied", key, err)
		}
	}
	if err := get(auditor, ""); err != nil {
		t.Errorf("auditor read everything: %v", err)
	}

	engine := e.StoreAs(t, "engine")
	for _, key := range []string{"placement/instance/x", "endpoint/service/web/x", "event/x", "observed/clock"} {
		if err := put(engine, key); err != nil {
			t.Errorf("engine put %s: %v", key, err)
		}
	}
	for _, key := range []string{"desired/service/web/image", "auth/engine/rules", "intent/user/service/web/instances"} {
		if err := put(engine, key); !denied(err) {
			t.Errorf("engine put %s: %v; want permission denied", key, err)
		}
	}

	// Without a certificate the TLS handshake itself is refused.
	tlsCfg, err := pki.ClientTLS(e.CA.Dir+"/"+pki.CACertFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := facts.Dial(ctx, facts.StoreConfig{Endpoints: e.Endpoints(), TLS: tlsCfg, DialTimeout: 2 * time.Second}); err == nil {
		err := put(s, "desired/service/evil/image")
		s.Close()
		if err == nil {
			t.Error("a client without a certificate wrote desired/")
		}
	}

	// A principal whose rules are removed loses its access.
	node3 := e.StoreAs(t, "node:node-3")
	if err := put(node3, "observed/node/node-3/state"); err != nil {
		t.Fatalf("node-3 before revocation: %v", err)
	}
	delete(ps, "node:node-3")
	if ch, err := access.Sync(ctx, root, access.Want(root.Root, ps, []string{"web"})); err != nil || ch.UsersRemoved != 1 {
		t.Fatalf("sync after removing node-3: %s, %v", ch, err)
	}
	if err := put(node3, "observed/node/node-3/state"); err == nil {
		t.Error("node-3 still writes after its rules were removed")
	}

	// A new service's metrics prefix reaches every node through the shared role.
	if err := put(node2, "observed/service/db/metrics/cpu/abcde"); !denied(err) {
		t.Errorf("node-2 put metrics of a service that does not exist: %v; want denied", err)
	}
	if _, err := access.Sync(ctx, root, access.Want(root.Root, ps, []string{"db", "web"})); err != nil {
		t.Fatal(err)
	}
	if err := put(node2, "observed/service/db/metrics/cpu/abcde"); err != nil {
		t.Errorf("node-2 put metrics of the new service db: %v", err)
	}
}

func TestParseRejectsMistakes(t *testing.T) {
	for _, tc := range []struct{ principal, raw, want string }{
		{"node:node-1", `[{"prefix": "observed/", "access": "all"}]`, "expected read, write or readwrite"},
		{"node:node-1", `[{"prefix": "a/", "key": "b", "access": "read"}]`, "both prefix and key"},
		{"node:node-1", `[{"access": "read"}]`, "neither prefix nor key"},
		{"node:node-1", `[{"prefix": "observed/{nod}/", "access": "read"}]`, "unknown template {nod}"},
		{"node:node-1", `{"prefix": "x"}`, "expected a JSON list"},
		{"node:node-1", `[{"prefix": "x/", "access": "read", "extra": 1}]`, "unknown field"},
		{"node:node-1", `[{"prefix": "x*", "access": "read"}]`, "* stands alone"},
		{"bogus", `[]`, "not a principal"},
		{"user:", `[]`, "empty name"},
		{"user:Alice", `[]`, "not allowed"},
	} {
		_, err := access.Parse(tc.principal, []byte(tc.raw))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s, %s) = %v; want an error containing %q", tc.principal, tc.raw, err, tc.want)
		}
	}
}

func TestCovers(t *testing.T) {
	eng := access.Builtins(ctl, leader, []string{"placement/", "endpoint/"})[access.KindEngine]
	for prefix, want := range map[string]bool{"placement/": true, "endpoint/service/": true, "desired/": false, "": false} {
		if got := eng.Covers(prefix); got != want {
			t.Errorf("engine covers %q = %v, want %v", prefix, got, want)
		}
	}
}

func TestPrincipalOf(t *testing.T) {
	for key, want := range map[string]string{
		"auth/node:node-2/rules": "node:node-2", "auth/engine/rules": "engine",
		"auth//rules": "", "auth/a/b/rules": "", "auth/x/other": "", "desired/x/rules": "",
	} {
		got, ok := access.PrincipalOf(key)
		if ok != (want != "") || (ok && got != want) {
			t.Errorf("PrincipalOf(%q) = %q, %v; want %q", key, got, ok, want)
		}
	}
	if access.IsDenied(nil) || access.IsDenied(errors.New("etcdserver: request timed out")) {
		t.Error("IsDenied accepts what is not etcd's refusal")
	}
}
