package agent

import (
	"context"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// A service's spec is built once for all its instances and again as soon
// as any of its facts changes, is added or is removed: what Desired says
// is always what the facts say, and instances of an unchanged service share
// their spec's maps instead of each decoding its own.
func TestFeedBuildsAServiceSpecOnceAndAgainOnEveryChange(t *testing.T) {
	e := etcdtest.StartSecure(t)
	root := e.StoreAs(t, access.Root)
	writeRaw(t, root,
		facts.DesiredService("web"), `{}`, facts.ServiceImage("web"), `"nginx:1.29"`,
		facts.ServiceAttr("web", "env/MODE"), `"a"`,
		facts.Placement("a8f31"), `"node-1"`, facts.NodePlacement("node-1", "a8f31"), `"web"`, facts.InstanceService("a8f31"), `"web"`,
		facts.Placement("b72c9"), `"node-2"`, facts.NodePlacement("node-2", "b72c9"), `"web"`, facts.InstanceService("b72c9"), `"web"`)
	f := NewFeed(root, nil)
	f.Subscribe("node-1")
	f.Subscribe("node-2")
	runFeed(t, f)
	// spec is node-1's instance's spec once both nodes' instances are known.
	spec := func(check func(Spec) string) {
		t.Helper()
		eventually(t, func() string {
			a, b := f.desiredOne("node-1", "a8f31").Spec, f.desiredOne("node-2", "b72c9").Spec
			if a.ID != "a8f31" || b.ID != "b72c9" {
				return "ids " + a.ID + ", " + b.ID
			}
			if msg := check(a); msg != "" {
				return msg
			}
			return check(b)
		})
	}
	spec(func(s Spec) string {
		if s.Image != "nginx:1.29" || s.Env["MODE"] != "a" {
			return "spec " + s.Image + " MODE=" + s.Env["MODE"]
		}
		return ""
	})
	a, b := f.desiredOne("node-1", "a8f31").Spec, f.desiredOne("node-2", "b72c9").Spec
	a.Env["probe"] = "shared"
	if b.Env["probe"] != "shared" {
		t.Error("two instances of an unchanged service decoded the service's env each")
	}
	delete(a.Env, "probe")

	writeRaw(t, root, facts.ServiceImage("web"), `"nginx:1.30"`)
	spec(func(s Spec) string {
		if s.Image != "nginx:1.30" {
			return "after the image changed: " + s.Image
		}
		return ""
	})
	writeRaw(t, root, facts.ServiceAttr("web", "env/LEVEL"), `"2"`)
	spec(func(s Spec) string {
		if s.Env["LEVEL"] != "2" || s.Env["MODE"] != "a" {
			return "after an env var was added: " + fmtMap(s.Env)
		}
		return ""
	})
	// A delete alone: the largest revision stays, the count falls.
	if _, err := root.Commit(context.Background(), facts.Txn{Ops: []facts.Op{facts.Delete(facts.ServiceAttr("web", "env/MODE"))}}); err != nil {
		t.Fatal(err)
	}
	spec(func(s Spec) string {
		if _, ok := s.Env["MODE"]; ok || s.Env["LEVEL"] != "2" {
			return "after MODE was removed: " + fmtMap(s.Env)
		}
		return ""
	})
	// A delete and a put of another fact in one transaction.
	if _, err := root.Commit(context.Background(), facts.Txn{Ops: []facts.Op{
		facts.Delete(facts.ServiceAttr("web", "env/LEVEL")),
		facts.Put(facts.ServiceAttr("web", "env/MODE"), []byte(`"b"`)),
	}, Checked: true}); err != nil {
		t.Fatal(err)
	}
	spec(func(s Spec) string {
		if _, ok := s.Env["LEVEL"]; ok || s.Env["MODE"] != "b" {
			return "after LEVEL went and MODE came back: " + fmtMap(s.Env)
		}
		return ""
	})
	// The service removed: its instances have no spec, and the feed
	// forgets the one it built.
	if _, err := root.Commit(context.Background(), facts.Txn{Ops: []facts.Op{
		facts.Delete(facts.DesiredService("web")), facts.Delete(facts.ServiceImage("web")),
		facts.Delete(facts.ServiceAttr("web", "env/MODE")),
	}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		if w := f.desiredOne("node-1", "a8f31"); w.Ready || w.Spec.Image != "" {
			return "after the service was removed: ready " + w.Spec.Image
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.specs["web"]; ok {
			return "the feed still holds the removed service's spec"
		}
		return ""
	})
}
