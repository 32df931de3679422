package embedded_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ccattler/ccattler/facts/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEmbeddedSnapshots: the embedded member snapshots every
// SnapshotCount entries (to keep few in memory) and still has every key
// after a restart from its snapshots and WAL.
func TestEmbeddedSnapshots(t *testing.T) {
	e := etcdtest.Start(t)
	n := int(e.Cfg.SnapshotCount)*2 + 500
	if e.Cfg.SnapshotCount == 0 || n > 5000 {
		t.Fatalf("SnapshotCount %d: this test wants a small one", e.Cfg.SnapshotCount)
	}
	ctx := context.Background()
	c := e.Store(t).Client
	for i := range n { // one raft entry each
		if _, err := c.Put(ctx, fmt.Sprintf("/snap-test/%05d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	snaps, _ := filepath.Glob(filepath.Join(e.Cfg.DataDir, "member", "snap", "*.snap"))
	if len(snaps) == 0 {
		t.Fatalf("no snapshot after %d entries with SnapshotCount %d", n, e.Cfg.SnapshotCount)
	}
	e.Close()
	e.Restart(t)
	r, err := e.Store(t).Client.Get(ctx, "/snap-test/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != int64(n) {
		t.Errorf("%d keys after the restart, want %d", r.Count, n)
	}
}
