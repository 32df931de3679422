package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// get services takes the instance counts from the summaries when every
// service has a valid one, and shows then what the full read shows; it
// reads everything when one is missing or breaks the schema, or when the
// desired image breaks it (the rules and the table count that differently).
func TestGetServicesSummaryOrFullRead(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	for k, v := range getFixture(time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)) {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	raw := func(key, value string) {
		t.Helper()
		if _, err := etcdtest.PutRaw(ctx, s, key, value); err != nil { // unchecked, as a careless writer
			t.Fatal(err)
		}
	}
	fallsBack := func(why string) {
		t.Helper()
		if w, err := loadServices(ctx, s); err != nil || w != nil {
			t.Errorf("%s: loadServices = %v, %v; want nil (read everything)", why, w != nil, err)
		}
		v := getView{kind: "services"}
		w, err := v.load(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.attrs["observed.instance.service"]) == 0 {
			t.Errorf("%s: the view's read has no instance facts", why)
		}
	}
	fallsBack("no summaries")

	// Summaries as the engine derives them: the full read's counts.
	full, err := loadWorld(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	counts := full.counts()
	write := func(bump int) {
		for _, n := range full.ids["desired.service"] {
			c := counts[n]
			c.Running += bump
			b, _ := json.Marshal(c)
			if _, err := etcdtest.PutRaw(ctx, s, facts.ServiceSummary(n), string(b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0)
	wantTable, wantWide, wantJSON := fullServices(t, s)
	w, err := loadServices(ctx, s)
	if err != nil || w == nil {
		t.Fatalf("loadServices with a summary per service = %v, %v", w != nil, err)
	}
	if n := len(w.attrs["observed.instance.service"]); n != 0 {
		t.Errorf("the services' read holds %d instances; want none", n)
	}
	if table, wide, js := renderServices(t, w); table != wantTable || wide != wantWide || js != wantJSON {
		t.Errorf("from summaries:\n%s\n%s\n%s\nfull read:\n%s\n%s\n%s", table, wide, js, wantTable, wantWide, wantJSON)
	}
	// The counts shown are the summaries' own.
	write(1)
	w, _ = loadServices(ctx, s)
	for _, r := range w.services() {
		if r.Running != counts[r.Name].Running+1 {
			t.Errorf("%s: running %d, want the summary's %d", r.Name, r.Running, counts[r.Name].Running+1)
		}
	}
	write(0)

	raw(facts.ServiceSummary("api"), `{"running":"many"}`)
	fallsBack("api's summary breaks the schema")
	raw(facts.ServiceSummary("api"), `{"running":1,"healthy":1,"updated":0,"unplaced":"lots"}`)
	fallsBack("api's unplaced is no count") // a field the schema does not type
	write(0)
	raw(facts.ServiceImage("web"), `12345`)
	fallsBack("web's desired image breaks the schema")
	raw(facts.ServiceImage("web"), `"nginx:1.28"`)
	raw(facts.DesiredService("new"), `{}`)
	fallsBack("a service applied since the engine's last round")
}

// instanceFact recognizes an instance's own fact and nothing that only
// looks like one, whatever a writer put under observed/instance/.
func TestInstanceFact(t *testing.T) {
	for key, want := range map[string]string{
		"observed/instance/a8f31/service":         "a8f31",
		"observed/instance/a8f31/state":           "",
		"observed/instance//service":              "",
		"observed/instance/a8f31/x/service":       "",
		"observed/instance/service":               "",
		"desired/observed/instance/a8f31/service": "",
		"xobserved/instance/a8f31/service":        "",
	} {
		id, ok := instanceFact(key, "service")
		if ok != (want != "") || id != want && ok {
			t.Errorf("instanceFact(%q) = %q, %v; want %q", key, id, ok, want)
		}
	}
}

// get volumes and get endpoints read the trees their tables show, not the
// instance facts (most of a large cluster's), and print what a read of
// everything prints; endpoints with --node read the instances' nodes.
// Completion lists every kind's names from its own trees alone.
func TestGetReadsItsKindsTrees(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	now := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	for k, v := range getFixture(now) {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	// Values written past the schema, as a careless or hostile writer
	// would: shown as invalid by the partial reads as by the full one.
	for k, v := range map[string]string{
		facts.Endpoint("api", "c0001"): `{"ip":"not an ip","port":-1}`,
		facts.VolumeState("data"):      `"melted"`,
		facts.DesiredVolume("scratch"): `[]`,
	} {
		if _, err := etcdtest.PutRaw(ctx, s, k, v); err != nil {
			t.Fatal(err)
		}
	}
	full, err := loadWorld(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.bad) < 3 {
		t.Fatalf("the fixture's invalid values: %v, want them found", full.bad)
	}
	for _, tc := range []struct {
		view      getView
		instances bool // the read holds instance facts
	}{
		{getView{kind: "volumes"}, false},
		{getView{kind: "volumes", node: "node-1"}, false},
		{getView{kind: "endpoints"}, false},
		{getView{kind: "endpoints", service: "web"}, false},
		{getView{kind: "endpoints", names: []string{"web", "api", "nope"}}, false},
		{getView{kind: "volumes", names: []string{"data", "nope"}}, false},
		{getView{kind: "endpoints", node: "node-1"}, true},
		{getView{kind: "instances"}, true},
		{getView{kind: "instances", service: "web"}, true},
		{getView{kind: "instances", service: "api"}, true},
		{getView{kind: "instances", node: "node-1"}, true}, // a8f31 reported there, c0001 only placed
		{getView{kind: "instances", node: "node-2"}, true}, // b72c9 placed, not yet reported
		{getView{kind: "instances", service: "web", node: "node-1"}, true},
		{getView{kind: "instances", service: "web", names: []string{"a8f31", "c0001", "fffff"}}, true}, // c0001 is api's: found, not shown
		{getView{kind: "nodes"}, true},
	} {
		name := fmt.Sprintf("%s node=%q service=%q", tc.view.kind, tc.view.node, tc.view.service)
		w, err := tc.view.load(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(w.attrs["observed.instance.state"]) > 0; got != tc.instances {
			t.Errorf("%s: read instance facts %v, want %v", name, got, tc.instances)
		}
		// Narrowed to a service, the read parsed no other's instances.
		if tc.view.kind == "instances" && tc.view.service != "" && len(tc.view.names) == 0 {
			for id, svc := range w.attrs["observed.instance.service"] {
				if svc != tc.view.service {
					t.Errorf("%s: parsed instance %s of %s", name, id, svc)
				}
			}
		}
		// What is printed of each: its name, its row, wide row and typed form.
		printed := func(w *world) ([]any, []string) {
			items, missing := tc.view.selected(w, now)
			var out []any
			for _, it := range items {
				out = append(out, []any{it.name, it.row, it.wide, it.typed})
			}
			return out, missing
		}
		got, gotMissing := printed(w)
		want, wantMissing := printed(full)
		if len(want) == 0 {
			t.Fatalf("%s: the fixture shows nothing", name)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotMissing, wantMissing) {
			t.Errorf("%s:\n got %+v %v\nwant %+v %v", name, got, gotMissing, want, wantMissing)
		}
	}
	for _, kind := range []string{"services", "instances", "nodes", "endpoints", "volumes"} {
		w, err := loadTrees(ctx, s, nameTrees(kind))
		if err != nil {
			t.Fatal(err)
		}
		ids := func(w *world) (out []string) {
			for _, it := range w.items(kind, now) {
				out = append(out, it.id)
			}
			return out
		}
		if got, want := ids(w), ids(full); len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("completion of %s: %v, want %v", kind, got, want)
		}
	}
}

// BenchmarkGetLoad times what get reads for a table on a store of 10,000
// running instances with their endpoints and a volume, against a read of
// every tree (the baseline, trees=all, what each table read before).
func BenchmarkGetLoad(b *testing.B) {
	ctx := context.Background()
	s := etcdtest.Start(b).Store(b)
	var ops []facts.Op
	flush := func() {
		if _, err := s.Commit(ctx, facts.Txn{Ops: ops, Checked: true}); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	scaleFacts(300, 100, 100, func(k, v string) {
		if ops = append(ops, facts.Put(k, []byte(v))); len(ops) == 1000 {
			flush()
		}
	})
	for k, v := range map[string]string{facts.DesiredVolume("data"): `{}`, facts.VolumeSize("data"): `"10Gi"`, facts.VolumeState("data"): `"detached"`} {
		ops = append(ops, facts.Put(k, []byte(v)))
	}
	flush()
	for _, kind := range []string{"volumes", "endpoints"} {
		v := getView{kind: kind}
		for _, trees := range []string{"kind", "all"} {
			b.Run("kind="+kind+"/trees="+trees, func(b *testing.B) {
				load := func() (*world, error) { return v.load(ctx, s) }
				if trees == "all" {
					load = func() (*world, error) { return loadWorld(ctx, s) }
				}
				for b.Loop() {
					w, err := load()
					if err != nil {
						b.Fatal(err)
					}
					if items, _ := v.selected(w, time.Now()); len(items) == 0 {
						b.Fatal("nothing shown")
					}
				}
			})
		}
	}
}
