package agent

import (
	"context"
	"fmt"
	"maps"
	"strings"
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

// place is what the scheduler writes for an instance placed on node
// (policies/scheduler.hcl), and what create_instances wrote before it, as
// writeRaw's pairs: the placement, the node's entry naming the service,
// the instance's service.
func place(id, node, svc string) []string {
	return []string{facts.Placement(id), `"` + node + `"`, facts.NodePlacement(node, id), `"` + svc + `"`,
		facts.InstanceService(id), `"` + svc + `"`}
}

// unplace deletes what the rules that stop an instance delete: its
// placement and its node's entry.
func unplace(t testing.TB, s *facts.Store, id, node string) int64 {
	t.Helper()
	rev, err := s.Commit(context.Background(), facts.Txn{Ops: []facts.Op{
		facts.Delete(facts.Placement(id)), facts.Delete(facts.NodePlacement(node, id))}})
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
// default rules give it, delivers what is placed on the node and pokes it,
// and holds no other node's placements; after falling behind a compaction
// it relists and delivers the moves, removals and new placements it
// missed; a Resync relists again without losing anything.
func TestFeedAsNodeFollowsCompactionAndResync(t *testing.T) {
	e := etcdtest.StartSecure(t)
	root := e.StoreAs(t, access.Root)
	node := e.Admit(t, []string{"web"}, "node:node-1")
	kv := []string{facts.DesiredService("web"), `{}`, facts.ServiceImage("web"), `"nginx:1.29"`}
	kv = append(kv, place("a8f31", "node-1", "web")...)
	kv = append(kv, place("b72c9", "node-1", "web")...)
	kv = append(kv, place("c913d", "node-2", "web")...)
	writeRaw(t, root, kv...)
	var logs etcdtest.Logs
	f := NewFeed(node, logs.Logger(), "node-1")
	notify := f.Subscribe("node-1")
	stop := runFeed(t, f)
	want := map[string]string{"a8f31": "web:nginx:1.29", "b72c9": "web:nginx:1.29"}
	eventually(t, func() string {
		if got := desiredOn(f, "node-1"); !maps.Equal(got, want) {
			return "node-1 desires " + fmtMap(got) + ", want " + fmtMap(want)
		}
		return ""
	})
	if on, known := f.PlacedOn("a8f31"); on != "node-1" || !known {
		t.Errorf("PlacedOn(a8f31) = %q, %v; want node-1, true", on, known)
	}
	ownOnly := func() {
		t.Helper()
		f.mirror.View(func(r facts.Reader) {
			r.Prefix("placement/", func(p facts.Fact) bool {
				if !strings.HasPrefix(p.Key, "placement/node/node-1/") {
					t.Errorf("node-1's feed holds %s: another node's placement", p.Key)
				}
				return true
			})
		})
	}
	ownOnly()

	stop() // the feed falls behind...
	kv = append(place("a8f31", "node-2", "web"), place("d0e1f", "node-1", "web")...)
	kv = append(kv, facts.ServiceImage("web"), `"nginx:1.30"`)
	writeRaw(t, root, kv...)
	unplace(t, root, "a8f31", "node-1") // moved
	unplace(t, root, "b72c9", "node-1")
	unplace(t, root, "c913d", "node-2")
	rev := writeRaw(t, root, place("c913d", "node-1", "web")...)
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
	if on, _ := f.PlacedOn("a8f31"); on != "" {
		t.Errorf("PlacedOn(a8f31) = %q after the relist, want none: it left node-1", on)
	}
	ownOnly()
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

// A feed of many nodes (simulated ones) delivers each its entries however
// they reach it: listed before the node subscribed, or written while it
// runs; moved between nodes; and with the service the entry names. An
// entry of no valid form is no placement, said once; a change of a
// service's spec pokes the nodes with an instance of it.
func TestFeedFollowsItsNodesEntries(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	kv := []string{facts.DesiredService("web"), `{}`, facts.ServiceImage("web"), `"nginx:1.29"`,
		facts.DesiredService("api"), `{}`, facts.ServiceImage("api"), `"api:2"`}
	writeRaw(t, s, append(kv, place("a0001", "node-1", "web")...)...)
	var logs etcdtest.Logs
	f := NewFeed(s, logs.Logger(), "node-1", "node-2")
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

	writeRaw(t, s, place("b0002", "node-2", "api")...)
	writeRaw(t, s, place("c0003", "node-1", "web")...)
	wantOn("node-1", map[string]string{"a0001": "web:nginx:1.29", "c0003": "web:nginx:1.29"})
	n2 := f.Subscribe("node-2") // after its instance was placed and the batch applied
	wantOn("node-2", map[string]string{"b0002": "api:api:2"})
	if on, _ := f.PlacedOn("b0002"); on != "node-2" {
		t.Errorf("PlacedOn(b0002) = %q, want node-2", on)
	}

	// Moved: on its new node, gone from the old one.
	writeRaw(t, s, place("a0001", "node-2", "web")...)
	unplace(t, s, "a0001", "node-1")
	wantOn("node-1", map[string]string{"c0003": "web:nginx:1.29"})
	wantOn("node-2", map[string]string{"a0001": "web:nginx:1.29", "b0002": "api:api:2"})

	// Entries of no valid form: none is a placement, and each is said once.
	writeRaw(t, s, "placement/node/node-1/not-an-id", `"web"`, facts.NodePlacement("node-1", "d0004"), `7`,
		facts.NodePlacement("node-1", "e0005"), `"Not A Name"`)
	writeRaw(t, s, facts.NodePlacement("node-1", "d0004"), `8`)
	writeRaw(t, s, place("f0006", "node-1", "web")...)
	wantOn("node-1", map[string]string{"c0003": "web:nginx:1.29", "f0006": "web:nginx:1.29"})
	eventually(t, func() string {
		if n := strings.Count(logs.String(), "ignoring a placement entry of no valid form"); n != 3 {
			return fmt.Sprintf("%d warnings of entries of no valid form, want 3 (one a key)", n)
		}
		return ""
	})

	// A service's new spec pokes the node running it, not the others.
	for len(n2) > 0 {
		<-n2
	}
	writeRaw(t, s, facts.ServiceImage("api"), `"api:3"`)
	wantOn("node-2", map[string]string{"a0001": "web:nginx:1.29", "b0002": "api:api:3"})
	select {
	case <-n2:
	case <-time.After(30 * time.Second):
		t.Fatal("node-2 was not poked when the spec of a service it runs changed")
	}
}
