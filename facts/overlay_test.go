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

// A view's writes taken back leave the table's lists right for what the
// watch does next: the fact a laid put replaced is restored with fresh
// positions in its type's list and its value's, and the deletes that
// follow (each moves the last entry of a list into its hole) leave every
// fact listed once under its type and value, and no deleted one.
func TestViewOverLeavesListsRightForLaterDeletes(t *testing.T) {
	e := etcdtest.Start(t)
	s := e.Store(t)
	rev := put(t, s, "observed/instance/a8f31/service", `"web"`, "observed/instance/b72c9/service", `"web"`,
		"observed/instance/c0ffe/service", `"db"`, "observed/instance/d00d1/service", `"web"`)
	m, _ := runMirror(t, s)
	if err := m.WaitRev(t.Context(), rev); err != nil {
		t.Fatal(err)
	}
	svc, _ := s.Schema.Type("observed.instance.service")
	m.ViewOver([]facts.Overlay{
		{Key: "observed/instance/a8f31/service", Value: []byte(`"db"`), Since: rev}, // replaces a web
		{Key: "observed/instance/b72c9/service", Since: rev},                        // deletes a web
		{Key: "observed/instance/e1e10/service", Value: []byte(`"web"`)},            // a creation
	}, func(facts.Reader, []facts.Laid) {})
	del, err := s.Commit(t.Context(), facts.Txn{Ops: []facts.Op{facts.Delete("observed/instance/a8f31/service"), facts.Delete("observed/instance/c0ffe/service")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WaitRev(t.Context(), del); err != nil {
		t.Fatal(err)
	}
	m.View(func(r facts.Reader) {
		var types, web, db []string
		r.OfType(svc, func(f facts.Fact) bool { types = append(types, f.Key); return true })
		r.ByValue(svc, "web", func(f facts.Fact) bool { web = append(web, f.Key); return true })
		r.ByValue(svc, "db", func(f facts.Fact) bool { db = append(db, f.Key); return true })
		sort.Strings(types)
		sort.Strings(web)
		want := []string{"observed/instance/b72c9/service", "observed/instance/d00d1/service"}
		if fmt.Sprint(types) != fmt.Sprint(want) || fmt.Sprint(web) != fmt.Sprint(want) || len(db) != 0 || r.CountOfType(svc) != 2 {
			t.Errorf("after the view and two deletes: of the type %v (count %d), web %v, db %v; want %v under both, no db",
				types, r.CountOfType(svc), web, db, want)
		}
	})
}
