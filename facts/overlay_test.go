package facts_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// snapshot is everything a view answers for the keys and types below.
func snapshot(r facts.Reader, svc, ep *facts.FactType) string {
	var all, web, byInst []string
	r.Prefix("", func(f facts.Fact) bool {
		all = append(all, fmt.Sprintf("%s=%s@%d", f.Key, f.Value, f.ModRevision))
		return true
	})
	r.ByValue(svc, "web", func(f facts.Fact) bool { web = append(web, f.Key); return true })
	r.ByVar(ep, 1, "b72c9", func(f facts.Fact) bool { byInst = append(byInst, f.Key); return true })
	var types []string
	r.OfType(svc, func(f facts.Fact) bool { types = append(types, f.Key); return true })
	sort.Strings(web)
	sort.Strings(types)
	return fmt.Sprint(all, web, byInst, types, r.CountOfType(svc), r.CountOfType(ep), r.Len(), r.Rev())
}

// Writes laid over a view answer every kind of lookup as if they had
// committed, are skipped when the mirror's fact is newer than what their
// writer read, and are gone when the view ends, also after a panic.
func TestViewOverLaysAndTakesBack(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	rev := put(t, s, "observed/instance/a8f31/service", `"web"`, "placement/instance/a8f31", `"node-1"`,
		"endpoint/service/web/a8f31", `{"ip": "10.1.0.5", "port": 8080}`)
	newer := put(t, s, "observed/instance/c913d/service", `"db"`)
	m, _ := runMirror(t, s)
	if err := m.WaitRev(t.Context(), newer); err != nil {
		t.Fatal(err)
	}
	svc, _ := s.Schema.Type("observed.instance.service")
	ep, _ := s.Schema.Type("endpoint.service")
	var before string
	m.View(func(r facts.Reader) { before = snapshot(r, svc, ep) })

	over := []facts.Overlay{
		{Key: "observed/instance/b72c9/service", Value: []byte(`"web"`), Since: 0},                    // a creation
		{Key: "endpoint/service/web/b72c9", Value: []byte(`{"ip":"10.1.0.9","port":8080}`), Since: 0}, // indexed by its second variable
		{Key: "placement/instance/a8f31", Since: rev},                                                 // a delete
		{Key: "observed/instance/c913d/service", Value: []byte(`"web"`), Since: rev},                  // stale: the mirror's is newer
	}
	var inside string
	var laid []facts.Laid
	m.ViewOver(over, func(r facts.Reader, l []facts.Laid) {
		laid = l
		inside = snapshot(r, svc, ep)
		if f, ok := r.Get("observed/instance/b72c9/service"); !ok || f.ModRevision != facts.Uncommitted {
			t.Errorf("laid put read as %+v (present %v), want it at facts.Uncommitted", f, ok)
		}
		if _, ok := r.Get("placement/instance/a8f31"); ok {
			t.Error("a laid delete still reads as present")
		}
		if f, _ := r.Get("observed/instance/c913d/service"); string(f.Value) != `"db"` {
			t.Errorf("a write older than the mirror's fact was laid: %s", f.Value)
		}
	})
	want := fmt.Sprint([]string{
		"endpoint/service/web/a8f31={\"ip\": \"10.1.0.5\", \"port\": 8080}@" + fmt.Sprint(rev),
		"endpoint/service/web/b72c9={\"ip\":\"10.1.0.9\",\"port\":8080}@" + fmt.Sprint(facts.Uncommitted),
		"observed/instance/a8f31/service=\"web\"@" + fmt.Sprint(rev),
		"observed/instance/b72c9/service=\"web\"@" + fmt.Sprint(facts.Uncommitted),
		"observed/instance/c913d/service=\"db\"@" + fmt.Sprint(newer),
	}, []string{"observed/instance/a8f31/service", "observed/instance/b72c9/service"},
		[]string{"endpoint/service/web/b72c9"},
		[]string{"observed/instance/a8f31/service", "observed/instance/b72c9/service", "observed/instance/c913d/service"},
		3, 2, 5, newer)
	if inside != want {
		t.Errorf("view with the writes laid:\n have %s\n want %s", inside, want)
	}
	if len(laid) != 3 || laid[2].Key != "placement/instance/a8f31" || !laid[2].UnderOK || string(laid[2].Under.Value) != `"node-1"` || laid[0].UnderOK {
		t.Errorf("laid: %+v, want the three writes not stale, each with the fact it hid", laid)
	}
	var after string
	m.View(func(r facts.Reader) { after = snapshot(r, svc, ep) })
	if after != before {
		t.Errorf("the laid writes were not taken back:\n before %s\n after  %s", before, after)
	}

	func() {
		defer func() { recover() }()
		m.ViewOver(over, func(facts.Reader, []facts.Laid) { panic("evaluator") })
	}()
	m.View(func(r facts.Reader) { after = snapshot(r, svc, ep) })
	if after != before {
		t.Errorf("a panic left laid writes behind:\n before %s\n after  %s", before, after)
	}
	assertEqualsStore(t, m, s)
}
