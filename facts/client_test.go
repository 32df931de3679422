package facts_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

func keysOf(fs []facts.Fact) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Key)
	}
	return out
}

// TestStoreReads: the Store's reads other than List and Get, against a real
// etcd: the edges of a prefix, a backward visit in pages at one revision, the
// facts changed at one revision, a fact as it was, several facts at once.
func TestStoreReads(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	ctx := context.Background()
	if _, ok, rev, err := s.Last(ctx, "placement/instance/"); err != nil || ok || rev == 0 {
		t.Fatalf("Last of nothing = %v, %v at %d; want none, and the revision read", ok, err, rev)
	}
	ids := []string{"a1000", "a2000", "a3000", "a4000", "a5000"}
	var revs []int64
	for _, id := range ids {
		revs = append(revs, put(t, s, facts.Placement(id), `"node-1"`))
	}
	both := put(t, s, facts.Placement("a2000"), `"node-2"`, facts.Placement("a4000"), `"node-2"`)

	first, ok, _, err := s.First(ctx, "placement/instance/")
	if err != nil || !ok || first.Key != facts.Placement("a1000") || first.ModRevision != revs[0] || first.Value != nil {
		t.Errorf("First = %+v, %v, %v; want a1 at %d, no value", first, ok, err, revs[0])
	}
	last, ok, rev, err := s.Last(ctx, "placement/instance/")
	if err != nil || !ok || last.Key != facts.Placement("a5000") || rev != both {
		t.Errorf("Last = %+v, %v at %d, %v; want a5 at %d", last, ok, rev, err, both)
	}

	// Pages of two; keys written during the visit, after the first page's
	// keys and between the later pages', are not in it, and a key deleted
	// during it is.
	var seen []string
	values := map[string]string{}
	rev, err = s.Backward(ctx, "placement/instance/", 0, 2, func(f facts.Fact) bool {
		seen = append(seen, f.Key)
		values[f.Key] = fmt.Sprintf("%s at %d", f.Value, f.ModRevision)
		if len(seen) == 1 {
			put(t, s, facts.Placement("a6000"), `"node-3"`, facts.Placement("a2500"), `"node-3"`)
			if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement("a1000"))}}); err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
	want := []string{facts.Placement("a5000"), facts.Placement("a4000"), facts.Placement("a3000"), facts.Placement("a2000"), facts.Placement("a1000")}
	if err != nil || !slices.Equal(seen, want) || rev != both {
		t.Errorf("Backward visited %v at %d (%v); want %v at %d", seen, rev, err, want, both)
	}
	if got, want := values[facts.Placement("a4000")], fmt.Sprintf(`"node-2" at %d`, both); got != want {
		t.Errorf("Backward gave a4000 as %s, want %s", got, want)
	}
	if got, want := values[facts.Placement("a3000")], fmt.Sprintf(`"node-1" at %d`, revs[2]); got != want {
		t.Errorf("Backward gave a3000 as %s, want %s", got, want)
	}
	put(t, s, facts.Placement("a1000"), `"node-1"`) // back as it was, for what follows
	seen = nil
	if _, err := s.Backward(ctx, "placement/instance/", 0, 2, func(f facts.Fact) bool {
		seen = append(seen, f.Key)
		return len(seen) < 3
	}); err != nil || len(seen) != 3 {
		t.Errorf("Backward went on after fn said stop: %v (%v)", seen, err)
	}

	// a3000, between them in key order, changed at another revision.
	at, err := s.ModifiedAt(ctx, "placement/instance/", both)
	if err != nil || !slices.Equal(keysOf(at), []string{facts.Placement("a2000"), facts.Placement("a4000")}) ||
		string(at[0].Value) != `"node-2"` || at[1].ModRevision != both {
		t.Errorf("ModifiedAt(%d) = %+v, %v; want a2 and a4, node-2 at %d", both, at, err, both)
	}

	old, ok, err := s.GetAt(ctx, facts.Placement("a2000"), revs[1])
	if err != nil || !ok || string(old.Value) != `"node-1"` || old.ModRevision != revs[1] {
		t.Errorf("GetAt = %+v, %v, %v; want node-1 as written at %d", old, ok, err, revs[1])
	}
	if _, ok, err := s.GetAt(ctx, facts.Placement("a5000"), revs[0]); err != nil || ok {
		t.Errorf("GetAt before the key was written = %v, %v; want absent", ok, err)
	}

	got, err := s.GetMany(ctx, []string{facts.Placement("a4000"), facts.Placement("ffff0"), facts.Placement("a1000")})
	if err != nil || len(got) != 3 || string(got[0].Value) != `"node-2"` || (got[1].Key != "" || got[1].Value != nil) || string(got[2].Value) != `"node-1"` {
		t.Errorf("GetMany = %+v, %v; want a4's node-2, nothing, a1's node-1", got, err)
	}
}

// TestPrefixCondAndOtherRoot: a prefix condition fails once any key lies
// under the prefix; a store under another root shares the connection and
// none of the keys.
func TestPrefixCondAndOtherRoot(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	ctx := context.Background()
	none := facts.Txn{If: []facts.Cond{{Key: "placement/instance/", Prefix: true}},
		Ops: []facts.Op{facts.Put(facts.Placement("b1000"), []byte(`"node-1"`))}}
	if _, err := s.Commit(ctx, none); err != nil {
		t.Fatalf("nothing under the prefix yet: %v", err)
	}
	none.Ops = []facts.Op{facts.Put(facts.Placement("b2000"), []byte(`"node-1"`))}
	if _, err := s.Commit(ctx, none); !errors.Is(err, facts.ErrConflict) {
		t.Fatalf("a key under the prefix: %v, want a conflict", err)
	}

	ctl := s.WithRoot("/ccattler-ctl/")
	if _, err := ctl.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put("reload", []byte(`{"id":"x"}`))}, Checked: true}); err != nil {
		t.Fatal(err)
	}
	if f, ok, err := ctl.Get(ctx, "reload"); err != nil || !ok || string(f.Value) != `{"id":"x"}` {
		t.Errorf("other root: %+v, %v, %v", f, ok, err)
	}
	if all, _, err := s.List(ctx, "", 0); err != nil || !slices.Equal(keysOf(all), []string{facts.Placement("b1000")}) {
		t.Errorf("the fact root holds %v (%v); want only b1", keysOf(all), err)
	}
}

// TestWatchChanges: puts and deletes arrive as changes relative to the
// root, a creation told from an update by its revisions; a compacted start
// revision ends the watch with the compaction.
func TestWatchChanges(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := put(t, s, facts.Placement("c0000"), `"node-1"`)
	wc := s.WatchChanges(ctx, "placement/instance/", start+1)
	put(t, s, facts.Placement("c1000"), `"node-1"`)
	put(t, s, facts.Placement("c1000"), `"node-2"`)
	if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement("c1000"))}}); err != nil {
		t.Fatal(err)
	}
	var got []facts.Change
	for len(got) < 3 {
		select {
		case r := <-wc:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			got = append(got, r.Changes...)
		case <-ctx.Done():
			t.Fatalf("%d changes, want 3", len(got))
		}
	}
	created := got[0].CreateRevision == got[0].ModRevision
	updated := got[1].CreateRevision != got[1].ModRevision
	if got[0].Key != facts.Placement("c1000") || !created || string(got[0].Value) != `"node-1"` || !updated ||
		string(got[1].Value) != `"node-2"` || !got[2].Deleted || got[0].Deleted || got[1].Deleted {
		t.Errorf("changes %+v; want c1 created, updated, deleted", got)
	}

	if err := etcdtest.Compact(ctx, s, got[2].ModRevision); err != nil {
		t.Fatal(err)
	}
	for r := range s.WatchChanges(ctx, "placement/instance/", start) {
		if r.Err == nil || r.CompactRevision == 0 {
			t.Fatalf("a watch from a compacted revision answered %+v", r)
		}
		return // the channel closes after the error; it is enough to see it
	}
	t.Fatal("the watch from a compacted revision closed without an error")
}

// TestCampaign: the first campaign leads; a second waits until the first
// resigns. The first's guard holds while it leads and fails after.
func TestCampaign(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const prefix = "/ccattler-leader/"
	if id, err := s.Leader(ctx, prefix); err != nil || id != "" {
		t.Fatalf("Leader with no campaign = %q, %v", id, err)
	}
	a, err := s.Campaign(ctx, prefix, "a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	aKey, aRev := a.Key(), a.Rev() // Resign forgets them
	if id, err := s.Leader(ctx, prefix); err != nil || id != "a" {
		t.Errorf("Leader = %q, %v; want a", id, err)
	}
	if rev, err := s.CreateRevision(ctx, a.Key()); err != nil || rev != a.Rev() {
		t.Errorf("CreateRevision of a's key = %d, %v; want %d", rev, err, a.Rev())
	}
	write := func(g facts.Guard) error {
		_, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Placement("d1000"), []byte(`"node-1"`))}, Guard: []facts.Guard{g}})
		return err
	}
	if err := write(facts.CreatedAt(a.Key(), a.Rev())); err != nil {
		t.Fatalf("the leader's guard: %v", err)
	}
	won := make(chan *facts.Campaign, 1)
	go func() {
		b, err := s.Campaign(ctx, prefix, "b", 5*time.Second)
		if err != nil {
			t.Error(err)
			close(won)
			return
		}
		won <- b
	}()
	select {
	case <-won:
		t.Fatal("a second campaign won while the first leads")
	case <-time.After(300 * time.Millisecond):
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-won
	if b == nil {
		t.FailNow()
	}
	defer b.Close()
	if id, err := s.Leader(ctx, prefix); err != nil || id != "b" {
		t.Errorf("Leader after a resigned = %q, %v; want b", id, err)
	}
	if err := write(facts.CreatedAt(aKey, aRev)); !errors.Is(err, facts.ErrConflict) {
		t.Errorf("a resigned leader's guard: %v, want a conflict", err)
	}
	if rev, err := s.CreateRevision(ctx, aKey); err != nil || rev != 0 {
		t.Errorf("CreateRevision of a resigned key = %d, %v; want 0", rev, err)
	}
}

// A campaign still waiting when its context ends returns at once, also
// when etcd no longer answers: etcd's own cleanup of a cancelled campaign
// deletes its key with the client's context, which waited for as long as
// etcd was away (a server that was last of three to stop took 8 s).
func TestCampaignCancelledWithoutEtcd(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	ctx := context.Background()
	const prefix = "/ccattler-leader/"
	a, err := s.Campaign(ctx, prefix, "a", time.Second) // its Close waits a TTL for gone etcd
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		b, err := s.Campaign(bctx, prefix, "b", time.Second)
		if err == nil {
			b.Close()
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // b waits behind a
	e.Etcd.Close()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled campaign: %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a cancelled campaign did not return within 2s of its context's end with etcd gone")
	}
}

// A port that accepts connections and answers nothing, TLS handshake
// included: Dial gives up after its timeout and the probe's own, says the
// port did not answer (not that it serves TLS), and wraps ErrUnreachable.
func TestDialSilentPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, write nothing
			mu.Unlock()
		}
	}()
	start := time.Now()
	_, err = facts.Dial(context.Background(), facts.StoreConfig{Endpoints: []string{"http://" + ln.Addr().String()}, DialTimeout: 300 * time.Millisecond})
	if err == nil || !errors.Is(err, facts.ErrUnreachable) || !strings.Contains(err.Error(), "did not answer within 300ms") || strings.Contains(err.Error(), "serves TLS") {
		t.Errorf("dial of a silent port: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("dial of a silent port took %s", took)
	}
}
