package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
)

// Deleting a service of a few thousand running instances stops them all
// in the rounds the firing budget allows: stop_deleted deletes every
// placement from the round that sees the service gone, each stop its own
// firing, and every stopped instance's stop is noted (gc's note_stopped)
// for collect_stopped an hour later. The transactions are counted from the
// firing records, which commit with their writes: a round commits its plan
// in as few transactions as etcd's limits allow, never one per instance.
func TestDeleteManyStopsInRoundsOfTheBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("converges thousands of instances")
	}
	srv, _ := newEngineServer(t)
	startSimNodes(t, srv, 3, "n-")
	dir := t.TempDir()
	file := writeFile(t, dir, "web.hcl", fmt.Sprintf("service \"web\" {\n  image     = \"nginx:1.28\"\n  instances = %d\n"+
		"  expose    = [8080]\n  resources { cpu = 0.001  memory = \"1Mi\" }\n}\n", stopsScale))
	st := srv.dial(t)
	ctx := context.Background()
	// count reads the instances' states, their noted stops, the placements
	// and the endpoints.
	type world struct{ running, stopped, noted, placed, endpoints, instances int }
	count := func() world {
		var w world
		obs, _, err := st.List(ctx, "observed/instance/", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range obs {
			_, attr, _ := strings.Cut(strings.TrimPrefix(f.Key, "observed/instance/"), "/")
			switch {
			case attr == "state" && string(f.Value) == `"running"`:
				w.running++
			case attr == "state" && string(f.Value) == `"stopped"`:
				w.stopped++
			case attr == "stopped_at":
				w.noted++
			case attr == "service":
				w.instances++
			}
		}
		for prefix, n := range map[string]*int{"placement/instance/": &w.placed, "endpoint/service/web/": &w.endpoints} {
			fs, _, err := st.List(ctx, prefix, 0)
			if err != nil {
				t.Fatal(err)
			}
			*n = len(fs)
		}
		return w
	}
	waitFor := func(within time.Duration, what string, cond func(w world) bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			w := count()
			if cond(w) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not within %s: %s (%+v)", within, what, w)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	srv.ok(t, "apply", "-f", file)
	waitFor(240*time.Second, fmt.Sprintf("%d running with endpoints", stopsScale), func(w world) bool {
		return w.running == stopsScale && w.endpoints == stopsScale
	})

	start := time.Now()
	srv.ok(t, "delete", "service", "web")
	waitFor(120*time.Second, "every instance stopped, its stop noted, nothing placed, no endpoint", func(w world) bool {
		return w.placed == 0 && w.endpoints == 0 && w.running == 0 && w.stopped == stopsScale && w.noted == stopsScale
	})
	gone := time.Since(start)
	if w := count(); w.instances != stopsScale {
		t.Errorf("%d instances in the facts, want the %d stopped ones kept as history for collect_stopped", w.instances, stopsScale)
	}

	evs, _, err := st.List(ctx, "event/", 0)
	if err != nil {
		t.Fatal(err)
	}
	txns := map[int64]int{} // revision -> stops committed in it
	stops := 0
	for _, f := range evs {
		var rec facts.EventRecord
		if err := json.Unmarshal(f.Value, &rec); err != nil {
			t.Fatalf("%s: %v", f.Key, err)
		}
		switch rec.Rule {
		case "stop_deleted":
			stops++
			txns[f.ModRevision]++
			if !deletesOnePlacement(rec.Writes) {
				t.Fatalf("a stop deletes one placement and its node's entry: %+v", rec.Writes)
			}
		case "stop_placed_extras", "cancel_deleted":
			t.Errorf("%s fired for a deleted service's running instances: %+v", rec.Rule, rec)
		}
	}
	if stops != stopsScale {
		t.Fatalf("%d stops recorded, want %d", stops, stopsScale)
	}
	// A round's plan of stops and their records (--round-firings of
	// them at most) fits one transaction (etcd allows 16,384
	// operations); one more because a round shares its budget with
	// another rule (every run: 999 stops a round), and one more if the
	// delete met instances still being reported (a conflict halves the
	// transaction that met it: the last 2 stops went in 2, once in four
	// CI runs).
	budget := engine.NewConfig().RoundFirings
	if most := (stopsScale+budget-1)/budget + 2; len(txns) > most {
		t.Fatalf("the stops took %d transactions (revision -> stops: %v), want at most %d (rounds of %d firings)", len(txns), txns, most, budget)
	}
	t.Logf("%d instances deleted in %s, stops in %d transaction(s)", stopsScale, gone.Round(time.Millisecond), len(txns))
}
