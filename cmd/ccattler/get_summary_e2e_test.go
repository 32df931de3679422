package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// fullServices renders the services as get did before summaries, from every
// instance fact: the table, the wide table and -o json.
func fullServices(t *testing.T, s *facts.Store) (table, wide, js string) {
	t.Helper()
	w, err := loadWorld(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return renderServices(t, w)
}

func renderServices(t *testing.T, w *world) (table, wide, js string) {
	t.Helper()
	var rows []serviceRow
	var wides []serviceWide
	var typed []any
	for _, it := range w.items("services", time.Now()) {
		rows = append(rows, it.row.(serviceRow))
		wides = append(wides, it.wide.(serviceWide))
		typed = append(typed, it.typed)
	}
	var a, b, c bytes.Buffer
	if err := printTable(&a, rows); err != nil {
		t.Fatal(err)
	}
	if err := printTable(&b, wides); err != nil {
		t.Fatal(err)
	}
	if err := printJSON(&c, typed); err != nil {
		t.Fatal(err)
	}
	return a.String(), b.String(), c.String()
}

// The real binary's `get services` (table, wide and -o json) against a
// server running the default policies equals what the full read of every
// instance fact shows, once the engine has counted; it reads the summaries
// to get there, and follows an instance's change.
func TestGetServicesFromSummaries(t *testing.T) {
	srv, _ := newEngineServer(t)
	startSimNodes(t, srv, 3, "g-")
	dir := t.TempDir()
	srv.ok(t, "apply", "-f", writeFile(t, dir, "svcs.hcl", `
service "web" {
  image     = "nginx:1.28"
  instances = 4
  expose    = [8080, 8443]
  labels    = { tier = "front" }
  resources {
    cpu    = 0.1
    memory = "64Mi"
  }
}
service "api" {
  image     = "api:2"
  instances = 2
  resources {
    cpu    = 0.1
    memory = "64Mi"
  }
}
service "idle" {
  image     = "nginx:1.28"
  instances = 0
}
`))
	st := srv.dial(t)
	ctx := context.Background()
	// same polls until the binary's three outputs equal the full read's and
	// want holds of the services' counts.
	same := func(what string, want func(map[string]serviceJSON) bool) {
		t.Helper()
		var got, full [3]string
		deadline := time.Now().Add(90 * time.Second)
		for {
			got = [3]string{srv.ok(t, "get", "services"), srv.ok(t, "get", "services", "-o", "wide"), srv.ok(t, "get", "services", "-o", "json")}
			full[0], full[1], full[2] = fullServices(t, st)
			var rows []serviceJSON
			if err := json.Unmarshal([]byte(got[2]), &rows); err != nil {
				t.Fatalf("get services -o json: %v\n%s", err, got[2])
			}
			byName := map[string]serviceJSON{}
			for _, r := range rows {
				byName[r.Name] = r
			}
			if got == full && want(byName) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not within 90s: %s\nget services:\n%s\n%s\n%s\nfull read:\n%s\n%s\n%s", what, got[0], got[1], got[2], full[0], full[1], full[2])
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	counts := func(name string, running, healthy, updated int) func(map[string]serviceJSON) bool {
		return func(m map[string]serviceJSON) bool {
			r := m[name]
			return r.Running == running && r.Healthy == healthy && r.Updated == updated
		}
	}
	all := func(fs ...func(map[string]serviceJSON) bool) func(map[string]serviceJSON) bool {
		return func(m map[string]serviceJSON) bool {
			for _, f := range fs {
				if !f(m) {
					return false
				}
			}
			return len(m) == 3
		}
	}
	same("every instance running and healthy", all(counts("web", 4, 4, 4), counts("api", 2, 2, 2), counts("idle", 0, 0, 0)))

	// The counts came from the summaries: one per service, and the
	// services' read holds no instance fact.
	w, err := loadServices(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if w == nil {
		t.Fatal("loadServices: a service has no summary; get services read every instance")
	}
	if len(w.summaries) != 3 || len(w.attrs["observed.instance.service"]) != 0 {
		t.Errorf("services read: %d summaries, %d instances; want 3 and none", len(w.summaries), len(w.attrs["observed.instance.service"]))
	}
	sum, _, _ := srv.factsUnder(t, "observed/service/web/summary")
	var ws map[string]int
	if err := json.Unmarshal([]byte(sum["observed/service/web/summary"]), &ws); err != nil || ws["target"] != 4 {
		t.Errorf("web's summary %q: want target 4 (%v)", sum["observed/service/web/summary"], err)
	}

	// One instance of web turns unhealthy: its summary follows.
	f := readFleet(t, srv, "web")
	var id string
	for i := range f.state {
		id = i
		break
	}
	// The sim agent's knob (agent/sim/knobs.go), a type its plugin registers.
	if _, err := etcdtest.PutRaw(ctx, st, "sim/instance/"+id+"/health", `"unhealthy"`); err != nil {
		t.Fatal(err)
	}
	// The health policy replaces it in time (a new instance first): while
	// it runs, web has one instance fewer healthy than running.
	same(fmt.Sprintf("web's %s unhealthy", id), func(m map[string]serviceJSON) bool {
		r := m["web"]
		return r.Healthy == r.Running-1 && r.Updated == r.Healthy && counts("api", 2, 2, 2)(m)
	})

	// A careless writer breaks web's summary: get reads everything rather
	// than show it, and the engine repairs it.
	if _, err := etcdtest.PutRaw(ctx, st, facts.ServiceSummary("web"), `{"running":"many"}`); err != nil {
		t.Fatal(err)
	}
	same("get services with web's summary broken", func(map[string]serviceJSON) bool { return true })
	waitUntil(t, 30*time.Second, "web's summary repaired", func() bool {
		sum, _, _ := srv.factsUnder(t, "observed/service/web/summary")
		var c instanceCounts
		return json.Unmarshal([]byte(sum["observed/service/web/summary"]), &c) == nil
	})
}
