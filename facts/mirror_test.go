package facts_test

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// runMirror starts a mirror of s and returns it with a stop function that
// waits for Run to return.
func runMirror(t *testing.T, s *facts.Store) (*facts.Mirror, func()) {
	t.Helper()
	m := facts.NewMirror(s, nil)
	return m, follow(t, m)
}

// follow syncs m and runs it until the test ends or the returned stop is
// called (which waits for Run to return).
func follow(t *testing.T, m *facts.Mirror) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return sync.OnceFunc(stop)
}

// assertEqualsStore checks that the mirror holds exactly a fresh list of the store.
func assertEqualsStore(t *testing.T, m *facts.Mirror, s *facts.Store) {
	t.Helper()
	assertMirrorsPrefixes(t, m, s, "")
}

func put(t *testing.T, s *facts.Store, kv ...string) int64 {
	t.Helper()
	var ops []facts.Op
	for i := 0; i < len(kv); i += 2 {
		ops = append(ops, facts.Put(kv[i], []byte(kv[i+1])))
	}
	rev, err := s.Commit(context.Background(), facts.Txn{Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func del(t *testing.T, s *facts.Store, keys ...string) int64 {
	t.Helper()
	var ops []facts.Op
	for _, k := range keys {
		ops = append(ops, facts.Delete(k))
	}
	rev, err := s.Commit(context.Background(), facts.Txn{Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func TestMirrorFollowsAndIndexes(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	put(t, s, "observed/instance/a8f31/service", `"web"`, "placement/instance/a8f31", `"node-1"`)
	m, _ := runMirror(t, s)
	sub := m.Subscribe()
	defer sub.Close()

	put(t, s, "observed/instance/b72c9/service", `"web"`,
		"observed/instance/c913d/service", `"db"`,
		"endpoint/service/web/a8f31", `{"ip": "10.1.0.5", "port": 8080}`,
		"endpoint/service/web/b72c9", `{"ip": "10.1.0.9", "port": 8080}`)
	last := del(t, s, "placement/instance/a8f31")
	assertEqualsStore(t, m, s)

	svc, _ := s.Schema.Type("observed.instance.service")
	ep, _ := s.Schema.Type("endpoint.service")
	pl, _ := s.Schema.Type("placement.instance")
	m.View(func(r facts.Reader) {
		var web []string
		r.ByValue(svc, "web", func(f facts.Fact) bool { web = append(web, f.Key); return true })
		sort.Strings(web)
		if fmt.Sprint(web) != "[observed/instance/a8f31/service observed/instance/b72c9/service]" {
			t.Errorf("instances of web = %v", web)
		}
		var byInst []string
		r.ByVar(ep, 1, "b72c9", func(f facts.Fact) bool { byInst = append(byInst, f.Key); return true })
		if fmt.Sprint(byInst) != "[endpoint/service/web/b72c9]" {
			t.Errorf("endpoints of b72c9 = %v", byInst)
		}
		var inst []string
		r.Prefix("observed/instance/c913d/", func(f facts.Fact) bool { inst = append(inst, f.Key); return true })
		if fmt.Sprint(inst) != "[observed/instance/c913d/service]" {
			t.Errorf("facts of c913d = %v", inst)
		}
		if n := r.CountOfType(pl); n != 0 {
			t.Errorf("placements after delete = %d", n)
		}
		if n := r.CountOfType(svc); n != 3 {
			t.Errorf("instance services = %d", n)
		}
	})

	// The subscriber saw every change, in revision order, the delete with its last value.
	var changes []facts.Change
	var revs []int64
	deadline := time.After(5 * time.Second)
	for len(changes) < 5 {
		select {
		case <-sub.Ready():
			for _, b := range sub.Take() {
				revs = append(revs, b.Rev)
				changes = append(changes, b.Changes...)
			}
		case <-deadline:
			t.Fatalf("got %d changes, want 5", len(changes))
		}
	}
	if !sort.SliceIsSorted(revs, func(i, j int) bool { return revs[i] < revs[j] }) || revs[len(revs)-1] != last {
		t.Errorf("batch revisions %v, last write at %d", revs, last)
	}
	d := changes[4]
	if !d.Deleted || d.Key != "placement/instance/a8f31" || string(d.Value) != `"node-1"` || d.ModRevision != last {
		t.Errorf("delete change = %+v", d)
	}
}

func TestMirrorConcurrentWriters(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	m, _ := runMirror(t, s)
	sub := m.Subscribe()
	defer sub.Close()

	const writers, steps = 4, 150
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < steps; i++ {
				id := fmt.Sprintf("%05x", rng.Intn(40))
				var op facts.Op
				switch rng.Intn(3) {
				case 0:
					op = facts.Delete(facts.InstanceState(id))
				default:
					op = facts.Put(facts.InstanceState(id), []byte(`"running"`))
					if rng.Intn(2) == 0 {
						op.Value = []byte(`"pending"`)
					}
				}
				if _, err := s.Commit(context.Background(), facts.Txn{Ops: []facts.Op{op}}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	assertEqualsStore(t, m, s)

	// Replaying the subscription over an empty table reproduces the mirror,
	// and each change's Prev is what the replay holds before it.
	replay := facts.NewTable(nil)
	var prev int64
	for _, b := range sub.Take() {
		if b.Rev <= prev {
			t.Fatalf("batch revision %d after %d", b.Rev, prev)
		}
		prev = b.Rev
		for _, c := range b.Changes {
			// Each change says what the fact held before it.
			if old, ok := replay.Get(c.Key); !c.PrevKnown || ok != (c.Prev != nil) || string(old.Value) != string(c.Prev) {
				t.Fatalf("change of %s at %d: prev %q (known %v), the replay holds %q (%v)", c.Key, c.ModRevision, c.Prev, c.PrevKnown, old.Value, ok)
			}
			if c.Deleted {
				replay.Delete(c.Key)
			} else {
				replay.Put(c.Fact)
			}
		}
	}
	m.View(func(r facts.Reader) {
		if r.Len() != replay.Len() {
			t.Errorf("replay has %d facts, mirror %d", replay.Len(), r.Len())
		}
	})
}

// TestMirrorKeepsRecordsWithoutValues: a firing record is in the mirror
// with its key and revisions but not its value, which no rule reads and
// which was most of the mirror's bytes; every other fact keeps its value,
// and the changes published, those of a relist too, carry the record's.
func TestMirrorKeepsRecordsWithoutValues(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	rec := `{"rule":"place","kind":"derive","reads":[{"key":"desired/service/web/instances","rev":7}],"time":"2026-12-01T21:00:00Z"}`
	early, late := facts.Event("20261201T210000.000000001Z-000001"), facts.Event("20261201T210000.000000002Z-000001")
	put(t, s, early, rec, facts.InstanceState("aaaaa"), `"running"`)
	m, _ := runMirror(t, s) // lists early
	sub := m.Subscribe()
	defer sub.Close()
	rev := put(t, s, late, rec, facts.InstanceState("bbbbb"), `"pending"`) // watched
	assertEqualsStore(t, m, s)

	m.View(func(r facts.Reader) {
		for _, k := range []string{early, late} {
			f, ok := r.Get(k)
			if !ok || f.Value != nil || f.ModRevision == 0 || f.Invalid != "" {
				t.Errorf("%s in the mirror: %+v (present %v), want its revisions without a value", k, f, ok)
			}
		}
		if f, _ := r.Get(late); f.ModRevision != rev {
			t.Errorf("%s at revision %d, committed at %d", late, f.ModRevision, rev)
		}
		if f, _ := r.Get(facts.InstanceState("bbbbb")); string(f.Value) != `"pending"` {
			t.Errorf("an instance's state lost its value: %q", f.Value)
		}
		et, _ := s.Schema.Type("event")
		if n := r.CountOfType(et); n != 2 {
			t.Errorf("%d records of type event, want 2 (retention counts them)", n)
		}
	})
	var published string
	for _, b := range sub.Take() {
		for _, c := range b.Changes {
			if c.Key == late {
				published = string(c.Value)
			}
		}
	}
	if published != rec {
		t.Errorf("the watched record was published with %q, want its value %q", published, rec)
	}

	// A second mirror lists both: its relist batch carries their values.
	m2 := facts.NewMirror(s, nil)
	sub2 := m2.Subscribe()
	defer sub2.Close()
	if err := m2.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, b := range sub2.Take() {
		for _, c := range b.Changes {
			if strings.HasPrefix(c.Key, facts.Event("")) && string(c.Value) == rec {
				listed++
			}
		}
	}
	if listed != 2 {
		t.Errorf("a relist published %d records with their values, want 2", listed)
	}
	m2.View(func(r facts.Reader) {
		if f, ok := r.Get(early); !ok || f.Value != nil {
			t.Errorf("%s after a relist: %+v (present %v), want it without a value", early, f, ok)
		}
	})
}

func TestMirrorRelistsAfterCompaction(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	put(t, s, facts.InstanceState("aaaaa"), `"running"`, facts.InstanceState("bbbbb"), `"running"`)
	m, stop := runMirror(t, s)
	assertEqualsStore(t, m, s)
	sub := m.Subscribe()
	defer sub.Close()
	stop() // the mirror falls behind...

	del(t, s, facts.InstanceState("aaaaa"))
	put(t, s, facts.InstanceState("bbbbb"), `"failed"`)
	put(t, s, facts.InstanceState("ccccc"), `"pending"`)
	rev := put(t, s, facts.InstanceState("ccccc"), `"running"`)
	// ...and the history it would need is compacted away.
	if err := etcdtest.Compact(context.Background(), s, rev); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	assertEqualsStore(t, m, s)

	got, relisted := batchKeys(sub.Take())
	want := map[string]string{
		facts.InstanceState("aaaaa"): "deleted",
		facts.InstanceState("bbbbb"): `"failed"`,
		facts.InstanceState("ccccc"): `"running"`,
	}
	if !relisted || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("relist=%v changes %v, want %v", relisted, got, want)
	}
	if st, _ := m.Stats(); st.Relists < 2 {
		t.Errorf("relists = %d, want at least 2", st.Relists)
	}
}

func TestMirrorSurvivesEtcdRestart(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	put(t, s, facts.NodeState("node-1"), `"alive"`)
	m, _ := runMirror(t, s)
	assertEqualsStore(t, m, s)

	e.Close()
	time.Sleep(300 * time.Millisecond)
	e.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		_, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.NodeState("node-2"), []byte(`"alive"`))}})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("etcd did not come back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	del(t, s, facts.NodeState("node-1"))
	assertEqualsStore(t, m, s)
}

func TestMirrorTypesPluginFacts(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	m, _ := runMirror(t, s)
	// A fact of an unregistered type is kept, untyped...
	if _, err := etcdtest.PutRaw(context.Background(), s, "observed/node/n1/capacity/gpu", "2"); err != nil {
		t.Fatal(err)
	}
	reg := facts.EncodeRegistration(facts.Registration{Key: "observed/node/{node-id}/capacity/gpu", Type: "int"})
	put(t, s, facts.SchemaKey("observed.node.capacity.gpu"), string(reg))
	assertEqualsStore(t, m, s)
	// ...and typed once its registration arrives.
	gpu, ok := s.Schema.Type("observed.node.capacity.gpu")
	if !ok {
		t.Fatal("registration not applied to the schema")
	}
	m.View(func(r facts.Reader) {
		if n := r.CountOfType(gpu); n != 1 {
			t.Errorf("gpu facts = %d, want 1", n)
		}
	})
	if st, _ := m.Stats(); st.Untyped != 0 {
		t.Errorf("untyped = %d", st.Untyped)
	}
	// Now the store validates writes of the new type.
	if _, err := s.Commit(context.Background(), facts.Txn{Ops: []facts.Op{facts.Put("observed/node/n1/capacity/gpu", []byte(`"many"`))}}); err == nil {
		t.Error("invalid gpu value accepted")
	}
}

func TestStoreConflictAndRegisterBuiltins(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	ctx := context.Background()
	rev := put(t, s, facts.Placement("a8f31"), `"node-1"`)
	_, err := s.Commit(ctx, facts.Txn{If: []facts.Cond{{Key: facts.Placement("a8f31"), Rev: rev - 1}},
		Ops: []facts.Op{facts.Put(facts.Placement("a8f31"), []byte(`"node-2"`))}})
	if !errorsIs(err, facts.ErrConflict) {
		t.Fatalf("stale compare: %v", err)
	}
	if _, err := s.Commit(ctx, facts.Txn{If: []facts.Cond{{Key: facts.Placement("b72c9"), Rev: 0}},
		Ops: []facts.Op{facts.Put(facts.Placement("b72c9"), []byte(`"node-2"`))}}); err != nil {
		t.Fatalf("create-if-absent: %v", err)
	}
	if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Placement("a8f31"), []byte(`"Node 1"`))}}); err == nil {
		t.Fatal("invalid value written")
	}
	n, err := s.RegisterBuiltins(ctx)
	if err != nil || n != len(s.Schema.Types()) {
		t.Fatalf("RegisterBuiltins = %d, %v", n, err)
	}
	before, _, _ := s.List(ctx, "", 0)
	if n, err := s.RegisterBuiltins(ctx); err != nil || n != 0 {
		t.Fatalf("second RegisterBuiltins = %d, %v; want 0 writes", n, err)
	}
	after, _, _ := s.List(ctx, "", 0)
	if len(before) != len(after) {
		t.Errorf("second registration changed the store")
	}
}

func TestDialUnreachable(t *testing.T) {
	port := etcdtest.FreePort(t)
	ep := fmt.Sprintf("http://127.0.0.1:%d", port)
	start := time.Now()
	_, err := facts.Dial(context.Background(), facts.StoreConfig{Endpoints: []string{ep}, DialTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("dial of a closed port succeeded")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("gave up after %s, want a bounded wait", el)
	}
	if !contains(err.Error(), ep) {
		t.Errorf("error %q does not name the endpoint", err)
	}
}

// The mirror marks every fact that breaks the schema, with the reason: a
// bad value, a key of no valid form, and a lease key put without an etcd
// lease (through the watch and through a relist alike); a lease key on a
// live lease is valid, and gone when the lease is revoked.
func TestMirrorMarksInvalidFacts(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	ctx := context.Background()
	raw := func(k, v string) {
		t.Helper()
		if _, err := etcdtest.PutRaw(ctx, s, k, v); err != nil {
			t.Fatal(err)
		}
	}
	raw("lease/node/early", `{}`) // before the first list
	m, _ := runMirror(t, s)
	id, err := s.Grant(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	raw(facts.ServiceCPU("web"), `-3`)
	raw(facts.ServiceImage("web"), `12345`)
	raw("desired/service/web/expose/notaport", `{}`)
	raw(facts.Lease("fake"), `{}`)
	raw(facts.NodeState("node-1"), `"alive"`)
	rev, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{{Key: facts.Lease("node-1"), Value: []byte(`{}`), Lease: id}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WaitRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		facts.ServiceCPU("web"):               "invalid value -3",
		facts.ServiceImage("web"):             "invalid value 12345",
		"desired/service/web/expose/notaport": `"notaport" is not a valid port`,
		facts.Lease("fake"):                   "not attached to an etcd lease",
		facts.Lease("early"):                  "not attached to an etcd lease",
	}
	got := map[string]string{}
	for _, f := range m.Invalid() {
		got[f.Key] = f.Invalid
	}
	for k, reason := range want {
		if !strings.Contains(got[k], reason) {
			t.Errorf("%s: invalid %q, want it to say %q", k, got[k], reason)
		}
	}
	if len(got) != len(want) {
		t.Errorf("invalid facts %v, want exactly %v", got, want)
	}
	m.View(func(r facts.Reader) {
		if f, ok := r.Get(facts.Lease("node-1")); !ok || f.Invalid != "" || f.Lease != int64(id) {
			t.Errorf("lease/node/node-1 on lease %x: %+v", id, f)
		}
	})
	if st, _ := m.Stats(); st.Invalid != int64(len(want)) {
		t.Errorf("Stats().Invalid = %d, want %d", st.Invalid, len(want))
	}
	if err := s.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		gone := true
		m.View(func(r facts.Reader) { _, ok := r.Get(facts.Lease("node-1")); gone = !ok })
		if gone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lease/node/node-1 outlived its revoked lease in the mirror")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Pending tells a View's holder that the watch has a batch waiting for it,
// without a lock; once the View ends, the batch is applied and Pending is
// false again.
// watchingMirror starts etcd and a mirror of it, and returns them once
// the mirror's watch has delivered a first write, with a context for the
// test's waits.
func watchingMirror(t *testing.T) (*facts.Store, *facts.Mirror, context.Context) {
	t.Helper()
	s := etcdtest.Start(t).Store(t)
	m, _ := runMirror(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	if err := m.WaitRev(ctx, put(t, s, "desired/service/web", `{}`)); err != nil {
		t.Fatal(err) // the watch runs
	}
	return s, m, ctx
}

func TestMirrorPendingDuringView(t *testing.T) {
	s, m, ctx := watchingMirror(t)
	if m.Pending() {
		t.Fatal("pending with nothing written")
	}
	var rev int64
	m.View(func(r facts.Reader) {
		rev = put(t, s, "observed/instance/a8f31/service", `"web"`)
		deadline := time.Now().Add(10 * time.Second)
		for !m.Pending() {
			if time.Now().After(deadline) {
				t.Fatalf("a write at revision %d never showed as pending during the view", rev)
			}
			time.Sleep(time.Millisecond)
		}
		if _, ok := r.Get("observed/instance/a8f31/service"); ok {
			t.Error("the view changed while it was held")
		}
	})
	if err := m.WaitRev(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if m.Pending() {
		t.Error("still pending after the batch was applied")
	}
}

// A view held for a whole engine round lets the watch's answers pile up.
// The view taken next must see all of them: applied one answer per lock,
// a reader that takes the lock again at once saw one answer of the backlog
// per view, and the agents' reports reached the engine rounds late.
func TestMirrorAppliesTheBacklogAtOnce(t *testing.T) {
	s, m, _ := watchingMirror(t)
	sub := m.Subscribe()
	defer sub.Close()
	const n = 20
	key := func(i int) string { return fmt.Sprintf("observed/instance/a8f%02x/service", i) }
	m.View(func(facts.Reader) {
		for i := range n {
			put(t, s, key(i), `"web"`) // one transaction, one watch answer, each
		}
		deadline := time.Now().Add(10 * time.Second)
		for !m.Pending() || m.Backlog() < n-1 {
			if time.Now().After(deadline) {
				t.Fatalf("the watch delivered %d answers behind the one waiting (pending %v), want %d", m.Backlog(), m.Pending(), n-1)
			}
			time.Sleep(time.Millisecond)
		}
	})
	released := time.Now()
	// The watch waits for the lock: it takes it before this view does.
	seen := 0
	m.View(func(r facts.Reader) {
		for i := range n {
			if _, ok := r.Get(key(i)); ok {
				seen++
			}
		}
	})
	if seen != n {
		t.Errorf("the view after the held one saw %d of the %d writes made meanwhile", seen, n)
	}
	// Published at once too, each batch stamped with when the watch
	// delivered it, while the view was held, not when it was applied.
	changes := 0
	for _, b := range sub.Take() {
		changes += len(b.Changes)
		if b.Delivered.IsZero() || !b.Delivered.Before(released) {
			t.Errorf("a batch of revision %d delivered at %v, want before the view was released at %v", b.Rev, b.Delivered, released)
		}
	}
	if changes != n {
		t.Errorf("%d changes published with the backlog, want %d", changes, n)
	}
}
