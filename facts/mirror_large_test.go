package facts_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// largeTxn commits one transaction of n instances as create_instances
// writes them: a service, a state and a firing record (300 bytes) each, 3n
// operations. It returns the revision and the keys written.
func largeTxn(t *testing.T, s *facts.Store, batch, n int) (int64, []string) {
	t.Helper()
	record := []byte(`{"rule":"create_instances","reads":"` + strings.Repeat("x", 300) + `"}`)
	var ops []facts.Op
	var keys []string
	for i := range n {
		id := fmt.Sprintf("%02x%05x", batch, i)
		ops = append(ops,
			facts.Put("observed/instance/"+id+"/service", []byte(`"svc-00003"`)),
			facts.Put("observed/instance/"+id+"/state", []byte(`"pending"`)),
			facts.Put(facts.Event(fmt.Sprintf("20261129T185454.%09dZ-%06d", batch, i)), record))
		keys = append(keys, "observed/instance/"+id+"/service", "observed/instance/"+id+"/state")
	}
	// etcd may time a transaction this large out on a loaded machine
	// (and apply it later): the same puts again are the same facts.
	var err error
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		rev, cerr := s.Commit(ctx, facts.Txn{Ops: ops})
		cancel()
		if cerr == nil {
			return rev, keys
		}
		err = cerr
		t.Logf("commit of %d operations: %v; again", len(ops), cerr)
	}
	t.Fatal(err)
	return 0, nil
}

// A transaction near etcd's operation limit (16,384) comes back through
// the watch as one revision of 16,383 events, about 2 MB: the mirror
// applies every one of them at that revision, and a subscriber gets them
// all, also for two such transactions back to back and while the
// subscriber and the mirror's readers are slow.
func TestMirrorLargeTransactions(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	m, _ := runMirror(t, s)
	sub := m.Subscribe()
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 5461 // 3n = 16,383 operations

	var revs []int64
	var want []string
	for b := range 2 {
		rev, keys := largeTxn(t, s, b, n)
		revs, want = append(revs, rev), append(want, keys...)
	}
	// A reader holds the mirror while the third arrives.
	held := make(chan struct{})
	go m.View(func(facts.Reader) { <-held })
	rev, keys := largeTxn(t, s, 2, n)
	revs, want = append(revs, rev), append(want, keys...)
	time.Sleep(200 * time.Millisecond)
	close(held)

	if err := m.WaitRev(ctx, rev); err != nil {
		t.Fatalf("the mirror never reached revision %d: %v (at %d)", rev, err, m.Rev())
	}
	m.View(func(r facts.Reader) {
		for _, k := range want {
			if _, ok := r.Get(k); !ok {
				t.Fatalf("the mirror at %d lacks %s", r.Rev(), k)
			}
		}
	})
	seen := map[string]int64{}
	deadline := time.Now().Add(time.Minute)
	for len(seen) < 3*3*n && time.Now().Before(deadline) {
		select {
		case <-sub.Ready():
		case <-time.After(time.Second):
		}
		for _, b := range sub.Take() {
			for _, c := range b.Changes {
				seen[c.Key] = c.ModRevision
			}
		}
	}
	for _, k := range want {
		if _, ok := seen[k]; !ok {
			t.Fatalf("the subscriber never got %s (got %d changes)", k, len(seen))
		}
	}
	got := map[int64]int{}
	for _, r := range seen {
		got[r]++
	}
	for _, r := range revs {
		if got[r] != 3*n {
			t.Errorf("revision %d: the subscriber got %d changes, want %d", r, got[r], 3*n)
		}
	}
	assertEqualsStore(t, m, s)
}
