package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// stopsScale is how many instances TestScaleDownStopsEveryExtraInOneRound
// scales down from: as many as converge in about 30 s under -race on a
// loaded two-core machine.
const stopsScale = 2000

// A service scaled from a few thousand instances to 3 reaches 3 running in
// one round of stops: stop_placed_extras picks every extra at once, each
// stop its own firing. The rounds are counted from the firing records: every
// stop of one round was decided on the same count (its binding's placed),
// and a round after another one counts fewer.
func TestScaleDownStopsEveryExtraInOneRound(t *testing.T) {
	if testing.Short() {
		t.Skip("converges thousands of instances")
	}
	srv, _ := newEngineServer(t)
	startSimNodes(t, srv, 3, "n-")
	dir := t.TempDir()
	file := func(n int) string {
		return writeFile(t, dir, "web.hcl", fmt.Sprintf("service \"web\" {\n  image     = \"nginx:1.28\"\n  instances = %d\n"+
			"  resources { cpu = 0.001  memory = \"1Mi\" }\n}\n", n))
	}
	st := srv.dial(t)
	ctx := context.Background()
	// count reads the service's running, placed instances and its placements.
	count := func() (running, placed int) {
		obs, _, err := st.List(ctx, "observed/instance/", 0)
		if err != nil {
			t.Fatal(err)
		}
		pl, _, err := st.List(ctx, "placement/instance/", 0)
		if err != nil {
			t.Fatal(err)
		}
		placedSet := map[string]bool{}
		for _, f := range pl {
			placedSet[strings.TrimPrefix(f.Key, "placement/instance/")] = true
		}
		for _, f := range obs {
			id, attr, _ := strings.Cut(strings.TrimPrefix(f.Key, "observed/instance/"), "/")
			if attr == "state" && string(f.Value) == `"running"` && placedSet[id] {
				running++
			}
		}
		return running, len(pl)
	}
	waitFor := func(within time.Duration, what string, cond func(running, placed int) bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			r, p := count()
			if cond(r, p) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not within %s: %s (running %d, placed %d)", within, what, r, p)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	start := time.Now()
	srv.ok(t, "apply", "-f", file(stopsScale))
	waitFor(240*time.Second, fmt.Sprintf("%d running", stopsScale), func(r, p int) bool { return r == stopsScale })
	up := time.Since(start)

	start = time.Now()
	srv.ok(t, "apply", "-f", file(3))
	waitFor(120*time.Second, "3 running and 3 placed", func(r, p int) bool { return r == 3 && p == 3 })
	down := time.Since(start)

	evs, _, err := st.List(ctx, "event/", 0)
	if err != nil {
		t.Fatal(err)
	}
	rounds := map[string]int{} // the count a stop was decided on -> stops
	stops := 0
	for _, f := range evs {
		var rec facts.EventRecord
		if err := json.Unmarshal(f.Value, &rec); err != nil {
			t.Fatalf("%s: %v", f.Key, err)
		}
		if rec.Rule != "stop_placed_extras" {
			continue
		}
		stops++
		rounds[rec.Bindings["placed"]]++
		if !deletesOnePlacement(rec.Writes) {
			t.Fatalf("a stop deletes one placement and its node's entry: %+v", rec.Writes)
		}
	}
	if stops != stopsScale-3 {
		t.Fatalf("%d stops recorded, want %d", stops, stopsScale-3)
	}
	// One round, or two if the scale-down met instances still being
	// reported; never one per instance.
	if len(rounds) > 2 {
		t.Fatalf("the stops took %d rounds (count decided on -> stops: %v), want at most 2", len(rounds), rounds)
	}
	t.Logf("%d instances: up in %s, down to 3 in %s, stops in %d round(s): %v", stopsScale, up.Round(time.Millisecond), down.Round(time.Millisecond), len(rounds), rounds)
}

// deletesOnePlacement reports whether a stop's writes are what every rule
// that stops an instance writes: the deletes of its placement and of its
// node's entry (policies/scheduler.hcl), and nothing else.
func deletesOnePlacement(ws []facts.EventWrite) bool {
	if len(ws) != 2 || !ws[0].Deleted || !ws[1].Deleted {
		return false
	}
	id, ok := strings.CutPrefix(ws[0].Key, "placement/instance/")
	node, entryID, _ := strings.Cut(strings.TrimPrefix(ws[1].Key, "placement/node/"), "/")
	return ok && node != "" && entryID == id && ws[1].Key == facts.NodePlacement(node, id)
}
