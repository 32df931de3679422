package facts_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// The read-only inspections tests act through instead of a raw client:
// counts, the revision, a lease's time to live and the revision of its
// revocation; and etcdtest's raw writes, compaction and keyspace watch.
func TestStoreInspectionsAndRawTestSupport(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	ctx := context.Background()
	put(t, s, facts.Placement("a8f31"), `"node-1"`, facts.Placement("b72c9"), `"node-2"`)
	last := put(t, s, facts.NodeState("node-1"), `"alive"`)
	if n, rev, err := s.Count(ctx, "placement/instance/"); err != nil || n != 2 || rev != last {
		t.Errorf("Count = %d at %d, %v; want 2 at %d", n, rev, err, last)
	}
	if rev, err := s.Revision(ctx); err != nil || rev != last {
		t.Errorf("Revision = %d, %v; want %d", rev, err, last)
	}

	id, err := s.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	left, granted, err := s.LeaseTTL(ctx, id)
	if err != nil || granted != time.Minute || left <= 0 || left > time.Minute {
		t.Errorf("LeaseTTL = %s left of %s, %v; want up to a minute of a minute", left, granted, err)
	}
	on, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{{Key: facts.Lease("node-1"), Value: []byte(`{}`), Lease: id}}})
	if err != nil {
		t.Fatal(err)
	}
	gone, err := s.RevokeAt(ctx, id)
	if err != nil || gone <= on {
		t.Fatalf("RevokeAt = %d, %v; want a revision after %d", gone, err, on)
	}
	if _, ok, err := s.GetAt(ctx, facts.Lease("node-1"), gone-1); err != nil || !ok {
		t.Errorf("the leased key before the revocation: %v, %v; want it there", ok, err)
	}
	if _, ok, _ := s.GetAt(ctx, facts.Lease("node-1"), gone); ok {
		t.Error("the leased key outlived its lease's revocation")
	}
	if left, _, err := s.LeaseTTL(ctx, id); err != nil || left >= 0 {
		t.Errorf("LeaseTTL of a revoked lease = %s, %v; want negative", left, err)
	}

	// A raw write takes what the schema refuses.
	bad := `"Node 1"`
	if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Placement("c913d"), []byte(bad))}}); err == nil {
		t.Fatal("the schema let an invalid node name through: the raw write proves nothing")
	}
	rawRev, err := etcdtest.PutRaw(ctx, s, facts.Placement("c913d"), bad)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok, err := s.Get(ctx, facts.Placement("c913d")); err != nil || !ok || string(f.Value) != bad || f.ModRevision != rawRev {
		t.Errorf("after PutRaw: %+v %v %v; want %s at %d", f, ok, err, bad, rawRev)
	}
	beside := s.WithRoot("/elsewhere/")
	end, err := beside.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put("x", []byte("1"))}, Checked: true})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := etcdtest.WritesBetween(ctx, s, last, end)
	want := []string{s.Abs(facts.Lease("node-1")), s.Abs(facts.Lease("node-1")), s.Abs(facts.Placement("c913d")), "/elsewhere/x"}
	if err != nil || !slices.Equal(keys, want) {
		t.Errorf("WritesBetween = %v, %v; want %v", keys, err, want)
	}

	if err := etcdtest.Compact(ctx, s, end); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GetAt(ctx, facts.Placement("a8f31"), last); err == nil {
		t.Error("a read before the compaction succeeded")
	}
}
