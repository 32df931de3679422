package facts_test

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// nodeReads are the prefixes a node's agent mirrors; its principal may read them.
var nodeReads = []string{"placement/node/node-1/", "desired/service/"}

// asNode starts a secure member (TLS, client certificates, etcd auth) and
// returns it with a root store and a store of node:node-1 under the role
// its default rules give it.
func asNode(t *testing.T) (e *etcdtest.Etcd, root, node *facts.Store) {
	t.Helper()
	e = etcdtest.StartSecure(t)
	root = e.StoreAs(t, access.Root)
	node = e.Admit(t, []string{"web"}, "node:node-1")
	return e, root, node
}

// someFacts writes facts under the node's prefixes and beside them: under
// placement/ but not placement/node/node-1/ (another node's entries, the
// placements themselves), and in trees a node may read
// (observed/) or not (effective/, auth/).
func someFacts(t *testing.T, root *facts.Store) int64 {
	t.Helper()
	return put(t, root,
		facts.NodePlacement("node-1", "a8f31"), `"node-1"`,
		facts.NodePlacement("node-1", "b72c9"), `"node-2"`,
		facts.NodePlacement("node-2", "c913d"), `"web"`,
		facts.Placement("a8f31"), `"node-1"`,
		facts.DesiredService("web"), `{}`,
		facts.ServiceImage("web"), `"nginx:1.29"`,
		facts.ServiceColocate("web"), `true`,
		facts.NodeState("node-1"), `"alive"`,
		"effective/service/web/instances", `2`,
		"auth/user:alice/rules", `[{"prefix": "desired/", "access": "readwrite"}]`)
}

// assertMirrorsPrefixes checks that m holds exactly what root lists under
// prefixes now ("": everything): every fact, with its value and revisions,
// and nothing else.
func assertMirrorsPrefixes(t *testing.T, m *facts.Mirror, root *facts.Store, prefixes ...string) {
	t.Helper()
	ctx := context.Background()
	var want []facts.Fact
	var rev int64
	for _, p := range prefixes {
		fs, r, err := root.List(ctx, p, rev)
		if err != nil {
			t.Fatal(err)
		}
		rev = r
		want = append(want, fs...)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := m.WaitRev(wctx, rev); err != nil {
		t.Fatalf("mirror stuck at rev %d, store at %d", m.Rev(), rev)
	}
	m.View(func(r facts.Reader) {
		if r.Len() != len(want) {
			var keys []string
			r.Prefix("", func(f facts.Fact) bool { keys = append(keys, f.Key); return true })
			t.Errorf("mirror has %d facts %v, want the %d under %v", r.Len(), keys, len(want), prefixes)
		}
		for _, f := range want {
			got, ok := r.Get(f.Key)
			if !ok {
				t.Errorf("mirror lacks %s", f.Key)
				continue
			}
			value := f.Value
			if strings.HasPrefix(f.Key, facts.Event("")) {
				value = nil // a firing record is kept without its value
			}
			if string(got.Value) != string(value) || got.ModRevision != f.ModRevision || got.CreateRevision != f.CreateRevision {
				t.Errorf("%s: mirror %s@%d/%d, store %s@%d/%d", f.Key, got.Value, got.ModRevision, got.CreateRevision, value, f.ModRevision, f.CreateRevision)
			}
		}
	})
}

// batchKeys returns what the batches changed (key -> value, "deleted")
// and whether one of them was a relist.
func batchKeys(bs []facts.Batch) (map[string]string, bool) {
	got, relist := map[string]string{}, false
	for _, b := range bs {
		relist = relist || b.Relist
		for _, c := range b.Changes {
			if c.Deleted {
				got[c.Key] = "deleted"
			} else {
				got[c.Key] = string(c.Value)
			}
		}
	}
	return got, relist
}

// A mirror of a node's prefixes, as the node, holds exactly the facts under
// them, through the list and the watch alike, and is current as of a
// revision reached by writes it does not see.
func TestPrefixMirrorSeesExactlyItsPrefixes(t *testing.T) {
	_, root, node := asNode(t)
	someFacts(t, root)
	m := facts.NewMirrorOf(node, nil, nodeReads...)
	if got := m.Prefixes(); !slices.Equal(got, []string{"desired/service/", "placement/node/node-1/"}) {
		t.Errorf("Prefixes() = %v", got)
	}
	follow(t, m)
	assertMirrorsPrefixes(t, m, root, nodeReads...)
	sub := m.Subscribe()
	defer sub.Close()

	put(t, root, facts.NodePlacement("node-1", "c913d"), `"node-1"`, facts.ServiceImage("web"), `"nginx:1.30"`,
		"effective/service/web/instances", `3`, facts.ServicePin("web"), `"node-1"`)
	del(t, root, facts.NodePlacement("node-1", "b72c9"), facts.ServiceImage("web"))
	// The last write is outside the prefixes: the mirror still reaches its revision.
	put(t, root, facts.NodeState("node-2"), `"alive"`)
	assertMirrorsPrefixes(t, m, root, nodeReads...)

	got, relist := batchKeys(sub.Take())
	want := map[string]string{
		facts.NodePlacement("node-1", "c913d"): `"node-1"`,
		facts.NodePlacement("node-1", "b72c9"): "deleted",
		facts.ServiceImage("web"):              "deleted",
	}
	if relist || !maps.Equal(got, want) {
		t.Errorf("relist=%v changes %v, want %v from the watch", relist, got, want)
	}
}

// A prefix mirror that falls behind a compaction relists every prefix at
// one revision and emits exactly the difference.
func TestPrefixMirrorRelistsAfterCompaction(t *testing.T) {
	_, root, node := asNode(t)
	someFacts(t, root)
	m := facts.NewMirrorOf(node, nil, nodeReads...)
	stop := follow(t, m)
	assertMirrorsPrefixes(t, m, root, nodeReads...)
	sub := m.Subscribe()
	defer sub.Close()
	stop() // the mirror falls behind...

	del(t, root, facts.NodePlacement("node-1", "a8f31"))
	put(t, root, facts.NodePlacement("node-1", "b72c9"), `"node-1"`, facts.ServiceColocate("web"), `false`)
	put(t, root, facts.NodePlacement("node-1", "c913d"), `"node-3"`)
	rev := put(t, root, facts.ServiceCPU("web"), `0.5`, "effective/service/web/instances", `1`)
	// ...and the history it would need is compacted away.
	if err := etcdtest.Compact(context.Background(), root, rev); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	assertMirrorsPrefixes(t, m, root, nodeReads...)

	got, relist := batchKeys(sub.Take())
	want := map[string]string{
		facts.NodePlacement("node-1", "a8f31"): "deleted",
		facts.NodePlacement("node-1", "b72c9"): `"node-1"`,
		facts.NodePlacement("node-1", "c913d"): `"node-3"`,
		facts.ServiceCPU("web"):                `0.5`,
	}
	if !relist || !maps.Equal(got, want) {
		t.Errorf("relist=%v changes %v, want %v", relist, got, want)
	}
	if st, _ := m.Stats(); st.Relists < 2 {
		t.Errorf("relists = %d, want at least 2", st.Relists)
	}
}

// A principal that may not read a prefix gets an error naming it, and a
// mirror that has not listed holds nothing.
func TestPrefixMirrorNamesAPrefixItMayNotRead(t *testing.T) {
	_, root, node := asNode(t)
	someFacts(t, root)
	for _, p := range []string{"auth/", "effective/", ""} {
		m := facts.NewMirrorOf(node, nil, "placement/node/node-1/", p)
		err := m.Sync(context.Background())
		if err == nil {
			t.Errorf("mirror of %q as a node synced", p)
			continue
		}
		for _, want := range []string{"may not list", `"` + p + `"`, "permission denied"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("mirror of %q: %q does not say %q", p, err, want)
			}
		}
		if m.Rev() != 0 {
			t.Errorf("mirror of %q is at revision %d after a failed sync", p, m.Rev())
		}
		m.View(func(r facts.Reader) {
			if r.Len() != 0 {
				t.Errorf("mirror of %q holds %d facts after a failed sync", p, r.Len())
			}
		})
	}
}

// lockedBuffer is a log sink the mirror writes from its goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A watch etcd cancels — here because the node lost its grant on one prefix
// while etcd restarted, so that the resumed watch is refused — makes the
// mirror relist; while the grant is missing the relist fails naming the
// prefix and the mirror keeps what it had; once the grant is back it
// catches up with every change made meanwhile. A Resync relists too.
func TestPrefixMirrorSurvivesACanceledWatch(t *testing.T) {
	e, root, node := asNode(t)
	someFacts(t, root)
	var logs lockedBuffer
	m := facts.NewMirrorOf(node, slog.New(slog.NewTextHandler(&logs, nil)), nodeReads...)
	follow(t, m)
	assertMirrorsPrefixes(t, m, root, nodeReads...)

	rules, err := access.Default("node:node-1", "/ccattler-ctl/", "/ccattler-leader/")
	if err != nil {
		t.Fatal(err)
	}
	var fewer access.Rules
	for _, g := range rules {
		if g.Prefix != "desired/service/" {
			fewer = append(fewer, g)
		}
	}
	grant := func(r access.Rules) {
		t.Helper()
		plan := access.Want(root.Root, map[string]access.Rules{"node:node-1": r}, []string{"web"})
		if _, err := access.Sync(context.Background(), root, plan); err != nil {
			t.Fatal(err)
		}
	}
	grant(fewer)
	e.Close()
	e.Restart(t)
	waitLog := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(logs.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("the mirror never logged %q:\n%s", want, logs.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLog(`may not watch \"desired/service/\"`)
	waitLog(`may not list \"desired/service/\"`)
	m.View(func(r facts.Reader) {
		if _, ok := r.Get(facts.ServiceImage("web")); !ok {
			t.Error("the mirror dropped desired/service/ facts when it could no longer read them")
		}
	})
	// Writes while the node cannot follow are found by the relist.
	put(t, root, facts.ServiceImage("web"), `"nginx:1.31"`, facts.NodePlacement("node-1", "d0e1f"), `"node-1"`)
	del(t, root, facts.NodePlacement("node-1", "a8f31"))
	grant(rules)
	assertMirrorsPrefixes(t, m, root, nodeReads...)

	before, _ := m.Stats()
	m.Resync()
	deadline := time.Now().Add(20 * time.Second)
	for st, _ := m.Stats(); st.Relists == before.Relists; st, _ = m.Stats() {
		if time.Now().After(deadline) {
			t.Fatal("Resync did not relist within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	put(t, root, facts.NodePlacement("node-1", "e2f30"), `"node-2"`)
	assertMirrorsPrefixes(t, m, root, nodeReads...)
}
