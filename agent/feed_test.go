package agent

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// writeRaw writes raw JSON values in one transaction without the schema's
// check, as a careless or hostile writer could: a key of no valid form too.
func writeRaw(t testing.TB, s *facts.Store, kv ...string) int64 {
	t.Helper()
	var ops []facts.Op
	for i := 0; i < len(kv); i += 2 {
		ops = append(ops, facts.Put(kv[i], []byte(kv[i+1])))
	}
	rev, err := s.Commit(context.Background(), facts.Txn{Ops: ops, Checked: true})
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// runFeed runs f until the test ends (or the returned stop, which waits
// for Run to return) and waits until it has listed etcd.
func runFeed(t testing.TB, f *Feed) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	eventually(t, func() string {
		if _, ok := f.Desired("no-such-node"); !ok {
			return "the feed has not listed etcd"
		}
		return ""
	})
	return stop
}

// eventually polls cond until it returns "" or 30 s pass; the last answer
// says what was missing.
func eventually(t testing.TB, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		last := cond()
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %s", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// desiredOn describes what Desired says of node, for comparing with want
// (instance -> service:image, ":" when the service is not known yet).
func desiredOn(f *Feed, node string) map[string]string {
	got, _ := f.Desired(node)
	out := map[string]string{}
	for id, w := range got {
		out[id] = w.Spec.Service + ":" + w.Spec.Image
	}
	return out
}

func fmtMap(m map[string]string) string { return fmt.Sprint(m) }

// The feed of a node's agent, connected as the node under the role its
// default rules give it, delivers what is placed on the node and pokes it;
// after falling behind a compaction it relists and delivers the moves,
// removals and new placements it missed; a Resync relists again without
// losing anything.
func TestFeedAsNodeFollowsCompactionAndResync(t *testing.T) {
	e := etcdtest.StartSecure(t)
	root := e.StoreAs(t, access.Root)
	node := e.Admit(t, []string{"web"}, "node:node-1")
	writeRaw(t, root,
		facts.DesiredService("web"), `{}`, facts.ServiceImage("web"), `"nginx:1.29"`,
		facts.Placement("a8f31"), `"node-1"`, facts.InstanceService("a8f31"), `"web"`,
		facts.Placement("b72c9"), `"node-1"`, facts.InstanceService("b72c9"), `"web"`,
		facts.Placement("c913d"), `"node-2"`, facts.InstanceService("c913d"), `"web"`)
	var logs etcdtest.Logs
	f := NewFeed(node, logs.Logger())
	notify := f.Subscribe("node-1")
	stop := runFeed(t, f)
	want := map[string]string{"a8f31": "web:nginx:1.29", "b72c9": "web:nginx:1.29"}
	eventually(t, func() string {
		if got := desiredOn(f, "node-1"); !maps.Equal(got, want) {
			return "node-1 desires " + fmtMap(got) + ", want " + fmtMap(want)
		}
		return ""
	})
	if on, known := f.PlacedOn("c913d"); on != "node-2" || !known {
		t.Errorf("PlacedOn(c913d) = %q, %v; want node-2, true", on, known)
	}

	stop() // the feed falls behind...
	writeRaw(t, root, facts.Placement("a8f31"), `"node-2"`, facts.Placement("d0e1f"), `"node-1"`,
		facts.InstanceService("d0e1f"), `"web"`, facts.ServiceImage("web"), `"nginx:1.30"`)
	if _, err := root.Commit(context.Background(), facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement("b72c9"))}}); err != nil {
		t.Fatal(err)
	}
	rev := writeRaw(t, root, facts.Placement("c913d"), `"node-1"`)
	// ...and the history it would need is compacted away.
	if err := etcdtest.Compact(context.Background(), root, rev); err != nil {
		t.Fatal(err)
	}
	for len(notify) > 0 {
		<-notify
	}
	runFeed(t, f)
	want = map[string]string{"c913d": "web:nginx:1.30", "d0e1f": "web:nginx:1.30"}
	eventually(t, func() string {
		if got := desiredOn(f, "node-1"); !maps.Equal(got, want) {
			return "after the compaction node-1 desires " + fmtMap(got) + ", want " + fmtMap(want)
		}
		return ""
	})
	select {
	case <-notify:
	case <-time.After(30 * time.Second):
		t.Fatal("node-1 was not told after the relist")
	}
	if on, _ := f.PlacedOn("a8f31"); on != "node-2" {
		t.Errorf("PlacedOn(a8f31) = %q after the relist, want node-2", on)
	}
	if f.revision() < rev {
		t.Errorf("revision %d after the relist, want at least %d", f.revision(), rev)
	}

	f.Resync()
	eventually(t, func() string {
		if st, _ := f.mirror.Stats(); st.Relists < 3 {
			return "no relist after Resync"
		}
		return ""
	})
	if got := desiredOn(f, "node-1"); !maps.Equal(got, want) {
		t.Errorf("after a resync node-1 desires %s, want %s", fmtMap(got), fmtMap(want))
	}
}

// desiredOne is what Desired says of one instance of node.
func (f *Feed) desiredOne(node, id string) Want {
	got, _ := f.Desired(node)
	if w := got[id]; w != nil {
		return *w
	}
	return Want{}
}

// The feed learns the service of every instance placed on a node it
// serves, however the placement reaches it: listed before the node
// subscribed, placed on a node that subscribes later, placed while it
// runs, or placed before its service was written (looked up again until
// found) — though it looks at the placements of changed nodes alone.
func TestFeedLearnsEveryPlacedInstancesService(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	writeRaw(t, s, facts.DesiredService("web"), `{}`, facts.ServiceImage("web"), `"nginx:1.29"`,
		facts.Placement("a0001"), `"node-1"`, facts.InstanceService("a0001"), `"web"`)
	f := NewFeed(s, nil)
	f.Subscribe("node-1")
	runFeed(t, f)
	wantOn := func(node string, want map[string]string) {
		t.Helper()
		eventually(t, func() string {
			if got := desiredOn(f, node); !maps.Equal(got, want) {
				return node + " desires " + fmtMap(got) + ", want " + fmtMap(want)
			}
			return ""
		})
	}
	wantOn("node-1", map[string]string{"a0001": "web:nginx:1.29"})

	writeRaw(t, s, facts.Placement("b0002"), `"node-2"`, facts.InstanceService("b0002"), `"web"`)
	writeRaw(t, s, facts.Placement("c0003"), `"node-1"`, facts.InstanceService("c0003"), `"web"`)
	wantOn("node-1", map[string]string{"a0001": "web:nginx:1.29", "c0003": "web:nginx:1.29"})
	f.Subscribe("node-2") // after its instance was placed and the batch applied
	wantOn("node-2", map[string]string{"b0002": "web:nginx:1.29"})

	// Placed before its service is written: not known, then found.
	writeRaw(t, s, facts.Placement("d0004"), `"node-2"`)
	wantOn("node-2", map[string]string{"b0002": "web:nginx:1.29", "d0004": ":"})
	writeRaw(t, s, facts.InstanceService("d0004"), `"web"`) // not a fact the feed watches
	wantOn("node-2", map[string]string{"b0002": "web:nginx:1.29", "d0004": "web:nginx:1.29"})

	// Moved: known on its new node, gone from the old one.
	writeRaw(t, s, facts.Placement("a0001"), `"node-2"`)
	wantOn("node-1", map[string]string{"c0003": "web:nginx:1.29"})
	wantOn("node-2", map[string]string{"a0001": "web:nginx:1.29", "b0002": "web:nginx:1.29", "d0004": "web:nginx:1.29"})
	// Moved to a node this feed does not serve, or unplaced: forgotten.
	writeRaw(t, s, facts.Placement("c0003"), `"node-3"`)
	if _, err := s.Commit(t.Context(), facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement("d0004"))}}); err != nil {
		t.Fatal(err)
	}
	wantOn("node-1", map[string]string{})
	wantOn("node-2", map[string]string{"a0001": "web:nginx:1.29", "b0002": "web:nginx:1.29"})
	// Once it has looked, it has nothing left to look at.
	eventually(t, func() string {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.unfilled) != 0 || f.allUnfilled || len(f.lookedUp) != 0 {
			return fmt.Sprintf("after every service was found the feed still looks at nodes %v (all: %v) and instances %v", f.unfilled, f.allUnfilled, f.lookedUp)
		}
		return ""
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := map[string]string{"a0001": "web", "b0002": "web"}; !maps.Equal(f.instService, want) {
		t.Errorf("the feed keeps the services of %v, want those of the instances on its nodes, %v", f.instService, want)
	}
}
