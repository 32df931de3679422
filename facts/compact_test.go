package facts_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// Compact discards the history before a revision, as root on a secure
// member: reads and watches from before it fail with ErrCompacted, the
// revision itself and later stay readable, CompactRevision finds it, and
// compacting again to it or below, or past the present, is an error.
func TestCompactDiscardsHistoryBefore(t *testing.T) {
	e := etcdtest.StartSecure(t)
	s := e.StoreAs(t, access.Root)
	ctx := context.Background()
	key := facts.ServiceImage("web")

	if rev, err := s.CompactRevision(ctx); err != nil || rev != 1 {
		t.Fatalf("CompactRevision before any compaction = %d, %v; want 1", rev, err)
	}
	r1 := put(t, s, key, `"nginx:1.28"`)
	r2 := put(t, s, key, `"nginx:1.29"`)
	for range 5 {
		put(t, s, facts.ServiceCPU("web"), `0.5`) // history after r2, kept
	}
	if err := s.Compact(ctx, r2); err != nil {
		t.Fatal(err)
	}
	if rev, err := s.CompactRevision(ctx); err != nil || rev != r2 {
		t.Errorf("CompactRevision = %d, %v; want %d", rev, err, r2)
	}
	if _, _, err := s.GetAt(ctx, key, r1); !errors.Is(err, facts.ErrCompacted) {
		t.Errorf("GetAt(%s, %d) before the compact revision: %v, want ErrCompacted", key, r1, err)
	}
	if f, ok, err := s.GetAt(ctx, key, r2); err != nil || !ok || string(f.Value) != `"nginx:1.29"` {
		t.Errorf("GetAt(%s, %d) at the compact revision = %s, %v, %v; want it kept", key, r2, f.Value, ok, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp := <-s.WatchChanges(wctx, "desired/", r1)
	if !errors.Is(resp.Err, facts.ErrCompacted) || resp.CompactRevision != r2 {
		t.Errorf("watch from %d: err %v, compact revision %d; want ErrCompacted at %d", r1, resp.Err, resp.CompactRevision, r2)
	}

	for _, rev := range []int64{r2, r1} {
		if err := s.Compact(ctx, rev); !errors.Is(err, facts.ErrCompacted) {
			t.Errorf("Compact(%d) at or below the compact revision %d: %v, want ErrCompacted", rev, r2, err)
		}
	}
	cur, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, cur+100); err == nil || errors.Is(err, facts.ErrCompacted) {
		t.Errorf("Compact(%d) past the revision %d: %v, want a refusal", cur+100, cur, err)
	}
	if rev, err := s.CompactRevision(ctx); err != nil || rev != r2 {
		t.Errorf("CompactRevision after the refused compactions = %d, %v; want %d", rev, err, r2)
	}
}

// Only etcd's root may compact: a node's request is ErrCompactDenied and
// leaves the history whole.
func TestCompactNeedsRoot(t *testing.T) {
	e := etcdtest.StartSecure(t)
	root := e.StoreAs(t, access.Root)
	node := e.Admit(t, []string{"web"}, "node:node-1")
	ctx := context.Background()
	rev := put(t, root, facts.ServiceImage("web"), `"nginx:1.28"`)
	put(t, root, facts.ServiceImage("web"), `"nginx:1.29"`)
	if err := node.Compact(ctx, rev); !errors.Is(err, facts.ErrCompactDenied) {
		t.Errorf("a node's Compact(%d): %v, want ErrCompactDenied", rev, err)
	}
	if got, err := root.CompactRevision(ctx); err != nil || got != 1 {
		t.Errorf("CompactRevision after the refusal = %d, %v; want 1", got, err)
	}
}
