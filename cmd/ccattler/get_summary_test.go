package main

import (
	"context"
	"encoding/json"
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
