package agent

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// Desired keeps a node's wants until something they depend on pokes the
// node: after every kind of change — a placement added, moved away,
// deleted, a service's attribute, an invalid entry mended, a relist —
// what it returns is what building them afresh gives, and with no change
// in between it returns the wants it built.
func TestDesiredKeptUntilPoked(t *testing.T) {
	old := wantsMaxAge
	wantsMaxAge = time.Hour // a change that missed its poke would show
	t.Cleanup(func() { wantsMaxAge = old })
	s := etcdtest.Start(t).Store(t)
	writeRaw(t, s, facts.ServiceAttr("web", "image"), `"nginx:1.28"`)
	writeRaw(t, s, facts.Placement("a0001"), `"node-1"`, facts.NodePlacement("node-1", "a0001"), `"web"`, facts.InstanceService("a0001"), `"web"`)
	f := NewFeed(s, nil)
	for _, n := range []string{"node-1", "node-2"} {
		f.Subscribe(n)
	}
	runFeed(t, f)

	fresh := func(node string) map[string]*Want {
		var out map[string]*Want
		f.mirror.View(func(r facts.Reader) {
			f.mu.Lock()
			defer f.mu.Unlock()
			out = f.buildLocked(r, node)
		})
		return out
	}
	settled := func(what string, rev int64) {
		t.Helper()
		if err := f.mirror.WaitRev(t.Context(), rev); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() string {
			for _, n := range []string{"node-1", "node-2"} {
				got, _ := f.Desired(n)
				if want := fresh(n); !reflect.DeepEqual(got, want) {
					return fmt.Sprintf("%s: %s: Desired = %v, built afresh %v", what, n, wantsText(got), wantsText(want))
				}
			}
			return ""
		})
	}
	same := func(what string) {
		t.Helper()
		a, _ := f.Desired("node-1")
		b, _ := f.Desired("node-1")
		if reflect.ValueOf(a).Pointer() != reflect.ValueOf(b).Pointer() {
			t.Errorf("%s: Desired built node-1's wants again with nothing changed", what)
		}
	}

	settled("listed", 0)
	same("listed")
	settled("placed, invalid entry", writeRaw(t, s, facts.NodePlacement("node-1", "b0002"), `7`))
	rev := writeRaw(t, s, facts.NodePlacement("node-1", "b0002"), `"web"`)
	eventually(t, func() string {
		if got, _ := f.Desired("node-1"); got["b0002"] == nil || got["b0002"].Spec.Service != "web" {
			return "b0002's entry, mended, not followed"
		}
		return ""
	})
	settled("entry mended", rev)
	settled("image changed", writeRaw(t, s, facts.ServiceAttr("web", "image"), `"nginx:1.29"`))
	if got, _ := f.Desired("node-1"); got["a0001"] == nil || got["a0001"].Spec.Image != "nginx:1.29" {
		t.Errorf("a0001 after the image change: %+v", got["a0001"])
	}
	same("image changed")
	writeRaw(t, s, facts.NodePlacement("node-2", "a0001"), `"web"`)
	rev, err := s.Commit(t.Context(), facts.Txn{Ops: []facts.Op{facts.Delete(facts.NodePlacement("node-1", "a0001"))}})
	if err != nil {
		t.Fatal(err)
	}
	settled("moved to node-2", rev)
	if got, _ := f.Desired("node-1"); len(got) != 1 {
		t.Errorf("node-1 after a0001 moved away: %v, want b0002 alone", wantsText(got))
	}
	rev, err = s.Commit(t.Context(), facts.Txn{Ops: []facts.Op{facts.Delete(facts.NodePlacement("node-1", "b0002"))}})
	if err != nil {
		t.Fatal(err)
	}
	settled("b0002 unplaced", rev)
	if got, _ := f.Desired("node-1"); len(got) != 0 {
		t.Errorf("node-1 after b0002's placement went: %v, want nothing", wantsText(got))
	}
	f.Resync()
	settled("relisted", rev)
}

// wantsText shows what a node's wants hold, not where.
func wantsText(m map[string]*Want) map[string]Want {
	out := make(map[string]Want, len(m))
	for id, w := range m {
		out[id] = *w
	}
	return out
}
