package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestHotReload: one cluster (a server running the default policies from a
// directory, five simulated nodes, fifty instances spread over them) goes
// through the operator's steps in order: plan, reload a scheduler that
// packs, reload a broken file, plan against pending work.
func TestHotReload(t *testing.T) {
	runDir := policyCopy(t, nil)
	packDir := policyCopy(t, packing)
	defaultVersion, packVersion := versionOf(t, runDir), versionOf(t, packDir)
	if defaultVersion == packVersion {
		t.Fatalf("the packing copy has the default version %s: the score was not replaced", packVersion)
	}
	srv, admin := newEngineServer(t, "--policies", runDir)
	startSimNodes(t, srv, 5, "n-")
	svcDir := t.TempDir()
	srv.ok(t, "apply", "-f", serviceFile(t, svcDir, "app", 50))
	spread := waitFleet(t, srv, "app", 50)
	perNode := map[string]int{}
	for _, n := range spread.placement {
		perNode[n]++
	}
	if len(perNode) != 5 {
		t.Fatalf("the default scheduler did not spread 50 instances over 5 nodes: %v", perNode)
	}

	t.Run("status shows the running set", func(t *testing.T) {
		st := statusJSON(t, srv)
		if st["version"] != defaultVersion || st["source"] != runDir || st["server"] != "server-1" || st["leading"] != true {
			t.Errorf("status: %v; want version %s from %s, server-1 leading", st, defaultVersion, runDir)
		}
		out := srv.ok(t, "rules", "status")
		for _, want := range []string{"server    server-1 (leader)", "version   " + defaultVersion, filepath.Join(runDir, "scheduler.hcl")} {
			if !strings.Contains(out, want) {
				t.Errorf("rules status lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("plan over a converged cluster is empty and writes nothing", func(t *testing.T) {
		for _, dir := range []string{runDir, packDir} {
			var out string
			if w := writesDuring(t, srv, func() { out = srv.ok(t, "rules", "plan", dir, "--against", runDir) }); len(w) > 0 {
				t.Errorf("rules plan wrote %v", w)
			}
			if !strings.Contains(out, "No changes") {
				t.Errorf("plan of %s over a converged cluster:\n%s", dir, out)
			}
		}
	})

	t.Run("reloading the unchanged set changes nothing", func(t *testing.T) {
		var out string
		w := writesDuring(t, srv, func() { out = srv.ok(t, "rules", "reload") })
		if !strings.Contains(out, "server-1: unchanged, "+defaultVersion) {
			t.Errorf("rules reload of an unchanged set:\n%s", out)
		}
		for _, k := range w {
			if !strings.HasPrefix(k, "/ccattler-ctl/") {
				t.Errorf("an unchanged reload wrote %s", k)
			}
		}
	})

	t.Run("a packing scheduler places new instances and touches no running one", func(t *testing.T) {
		copyFile(t, filepath.Join(packDir, "scheduler.hcl"), filepath.Join(runDir, "scheduler.hcl"))
		out := srv.ok(t, "rules", "reload")
		if !strings.Contains(out, fmt.Sprintf("server-1: accepted %s from %s (was %s)", packVersion, runDir, defaultVersion)) {
			t.Fatalf("rules reload:\n%s", out)
		}
		if st := statusJSON(t, srv); st["version"] != packVersion || st["reloads"] != 1.0 {
			t.Errorf("status after the reload: %v; want version %s, 1 reload", st, packVersion)
		}
		srv.ok(t, "apply", "-f", serviceFile(t, svcDir, "app", 55))
		after := waitFleet(t, srv, "app", 55)
		added := map[string]int{}
		for id, n := range after.placement {
			if old, ok := spread.placement[id]; ok {
				if n != old || after.placedAt[id] != spread.placedAt[id] {
					t.Errorf("running instance %s touched: %s@%d -> %s@%d", id, old, spread.placedAt[id], n, after.placedAt[id])
				}
				continue
			}
			added[n]++
		}
		// Ten per node, all tied: the first node id wins and, now the most
		// allocated, takes every new one (15 x 0.5 cpu fits in 8).
		if fmt.Sprint(added) != "map[n-0001:5]" {
			t.Errorf("new placements %v; a packing scheduler puts all 5 on n-0001", added)
		}
		// Every placement of a new instance was made, and recorded, by the
		// new set: the swap happened between rounds, not inside one.
		versions := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(srv.ok(t, "events", "--rule", "schedule", "-o", "json")), "\n") {
			var ev struct {
				Version  string            `json:"version"`
				Bindings map[string]string `json:"bindings"`
			}
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("events -o json line %q: %v", line, err)
			}
			versions[ev.Bindings["id"]] = ev.Version
		}
		for id := range after.placement {
			want := defaultVersion
			if _, old := spread.placement[id]; !old {
				want = packVersion
			}
			if versions[id] != want {
				t.Errorf("placement of %s recorded with rule set %q, want %s", id, versions[id], want)
			}
		}
		if !strings.Contains(srv.ok(t, "events", "--rule", "reload"), "reload (reload)") {
			t.Errorf("no record of the accepted reload under event/")
		}
	})

	t.Run("a CEL type error is rejected at its position and the old set keeps placing", func(t *testing.T) {
		src, err := os.ReadFile(filepath.Join(runDir, "scheduler.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		bad := scoreLine.ReplaceAllString(string(src), `${1}score = "siblings + 'x'"`)
		writeFile(t, runDir, "scheduler.hcl", bad)
		line := 1 + strings.Count(bad[:strings.Index(bad, `score = "siblings`)], "\n")
		col := strings.Index(strings.Split(bad, "\n")[line-1], "+") + 1
		pos := fmt.Sprintf("%s:%d:%d: error: CEL type error", filepath.Join(runDir, "scheduler.hcl"), line, col)
		r := srv.ccattler(t, "rules", "reload")
		if r.code != 1 || !strings.Contains(r.stdout, "server-1: rejected") || !strings.Contains(r.stderr, pos) {
			t.Fatalf("reload of a type error: exit %d, want 1 and %q\nstdout:\n%s\nstderr:\n%s", r.code, pos, r.stdout, r.stderr)
		}
		st := statusJSON(t, srv)
		rej, _ := st["last_rejected"].(map[string]any)
		if st["version"] != packVersion || rej == nil || !strings.Contains(fmt.Sprint(rej["diagnostics"]), pos) || st["reload_failures"] != 1.0 {
			t.Errorf("status after the rejection: %v", st)
		}
		if out := srv.ok(t, "rules", "status"); !strings.Contains(out, "last rejected reload") || !strings.Contains(out, pos) {
			t.Errorf("rules status does not show the rejection:\n%s", out)
		}
		if ev := srv.ok(t, "events", "--rule", "reload"); !strings.Contains(ev, "(reload-rejected)") || !strings.Contains(ev, pos) {
			t.Errorf("no reload-rejected record with the position:\n%s", ev)
		}
		before := readFleet(t, srv, "app")
		srv.ok(t, "apply", "-f", serviceFile(t, svcDir, "app", 58))
		after := waitFleet(t, srv, "app", 58)
		added := map[string]int{}
		for id, n := range after.placement {
			if _, ok := before.placement[id]; !ok {
				added[n]++
			}
		}
		// n-0001 holds 15 and takes one more (8 cpu); then n-0002 is the
		// most allocated of the tied rest.
		if fmt.Sprint(added) != "map[n-0001:1 n-0002:2]" {
			t.Errorf("new placements under the packing set still running: %v", added)
		}
	})

	t.Run("plan prints the placements that would differ and writes nothing", func(t *testing.T) {
		// A set whose scheduler is paused leaves new instances pending:
		// work on which a spreading and a packing set disagree.
		copyFile(t, filepath.Join(policyCopy(t, paused), "scheduler.hcl"), filepath.Join(runDir, "scheduler.hcl"))
		if out := srv.ok(t, "rules", "reload"); !strings.Contains(out, "accepted") {
			t.Fatalf("reload with the scheduler paused:\n%s", out)
		}
		srv.ok(t, "apply", "-f", serviceFile(t, svcDir, "app", 62))
		waitUntil(t, 30*time.Second, "4 pending instances", func() bool {
			f := readFleet(t, srv, "app")
			return len(f.state) == 62 && len(f.placement) == 58
		})
		spreadDir := policyCopy(t, nil)
		var out, js string
		w := writesDuring(t, srv, func() {
			out = srv.ok(t, "rules", "plan", packDir, "--against", spreadDir)
			js = srv.ok(t, "rules", "plan", packDir, "--against", spreadDir, "-o", "json")
		})
		if len(w) > 0 {
			t.Errorf("rules plan wrote %v", w)
		}
		changed := regexp.MustCompile(`(?m)^  ~ placement/instance/[0-9a-f]{5} = "n-0002"  \(running: "n-000[345]"\)$`).FindAllString(out, -1)
		if len(changed) != 4 || !strings.Contains(out, "\nschedule\n") || !strings.Contains(out, "Plan: 4 to put, 4 to change, 4 to delete. Nothing was written.") {
			t.Errorf("plan of packing against spreading: %d changed placements, want 4 under schedule:\n%s", len(changed), out)
		}
		var pj struct {
			Written bool `json:"written"`
			Plan    struct {
				Changes []struct{ Op, Key, Rule string } `json:"changes"`
			} `json:"plan"`
		}
		if err := json.Unmarshal([]byte(js), &pj); err != nil || pj.Written || len(pj.Plan.Changes) != 12 {
			t.Fatalf("plan -o json: %v\n%s", err, js)
		}
		// Each moved placement, and its entry by node deleted on the old
		// node and put on the new one.
		ops := map[string]int{}
		for _, c := range pj.Plan.Changes {
			switch {
			case c.Rule != "schedule":
			case c.Op == "change" && strings.HasPrefix(c.Key, "placement/instance/"),
				c.Op == "put" && strings.HasPrefix(c.Key, "placement/node/n-0002/"),
				c.Op == "delete" && regexp.MustCompile(`^placement/node/n-000[345]/`).MatchString(c.Key):
				ops[c.Op]++
				continue
			}
			t.Errorf("plan -o json change %+v", c)
		}
		if ops["change"] != 4 || ops["put"] != 4 || ops["delete"] != 4 {
			t.Errorf("plan -o json: %v, want 4 placements changed, 4 entries put and 4 deleted", ops)
		}
		// Without --against, the directory the leading server runs stands
		// for the running set (scheduler paused): the same placements are
		// new, and the service's summary no longer counts them unplaced.
		out = srv.ok(t, "rules", "plan", packDir)
		if !strings.Contains(out, "against "+runDir+" (version ") || !strings.Contains(out, "Plan: 8 to put, 1 to change, 0 to delete.") ||
			!regexp.MustCompile(`(?m)^  ~ observed/service/app/summary = \{[^}]*\}  \(running: \{[^}]*"unplaced": 4`).MatchString(out) {
			t.Errorf("plan against the running set with the scheduler paused:\n%s", out)
		}
		// Once that directory no longer holds the running version, the
		// built-in policies stand in, and a note says so.
		copyFile(t, filepath.Join(spreadDir, "scheduler.hcl"), filepath.Join(runDir, "scheduler.hcl"))
		r := srv.ccattler(t, "rules", "plan", packDir)
		if r.code != 0 || !strings.Contains(r.stdout, "against (built-in default policies)") ||
			!strings.Contains(r.stderr, "note: the leading server server-1 runs version ") {
			t.Errorf("plan against an edited directory: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("a directory that does not load is not planned", func(t *testing.T) {
		bad := t.TempDir()
		writeFile(t, bad, "x.hcl", "rule \"x\" {\n  match { a = \"nowhere/{x}\" }\n}\n")
		r := srv.ccattler(t, "rules", "plan", bad)
		if r.code != 1 || !strings.Contains(r.stderr, filepath.Join(bad, "x.hcl")+":2:") {
			t.Errorf("plan of a broken set: exit %d\n%s", r.code, r.stderr)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get("http://" + admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body := string(b)
		for _, re := range []string{
			`(?m)^ccattler_engine_rounds_total [1-9]`,
			`(?m)^ccattler_engine_firings_total\{rule="schedule"\} 5[0-9]$`,
			`(?m)^ccattler_engine_plan_writes_total [1-9]`,
			`(?m)^ccattler_engine_txn_conflicts_total \d+$`,
			`(?m)^ccattler_engine_commit_duration_seconds_count [1-9]`,
			`(?m)^ccattler_mirror_facts [1-9]`,
			`(?m)^ccattler_ruleset_info\{source="` + regexp.QuoteMeta(runDir) + `",version="[0-9a-f]{12}"\} 1$`,
			`(?m)^ccattler_ruleset_reload_failures_total 1$`,
			`(?m)^ccattler_ruleset_reloads_total 2$`,
			`(?m)^ccattler_engine_leading 1$`,
		} {
			if !regexp.MustCompile(re).MatchString(body) {
				t.Errorf("/metrics lacks %s", re)
			}
		}
	})
}

// --watch reloads a changed directory by itself; a broken save is rejected
// and the next good one accepted.
func TestWatchReloads(t *testing.T) {
	dir := policyCopy(t, nil)
	srv, _ := newEngineServer(t, "--policies", dir, "--watch")
	v0 := versionOf(t, dir)
	copyFile(t, filepath.Join(policyCopy(t, packing), "scheduler.hcl"), filepath.Join(dir, "scheduler.hcl"))
	v1 := versionOf(t, dir)
	waitUntil(t, 10*time.Second, "the watched change loaded", func() bool { return statusJSON(t, srv)["version"] == v1 })
	writeFile(t, dir, "broken.hcl", "rule \"broken\" {\n")
	waitUntil(t, 10*time.Second, "the broken file rejected", func() bool {
		st := statusJSON(t, srv)
		rej, _ := st["last_rejected"].(map[string]any)
		return rej != nil && strings.Contains(fmt.Sprint(rej["diagnostics"]), "broken.hcl:")
	})
	if st := statusJSON(t, srv); st["version"] != v1 || st["watch"] != true || st["reloads"] != 1.0 {
		t.Errorf("status after a rejected save: %v", st)
	}
	if err := os.Remove(filepath.Join(dir, "broken.hcl")); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(policyCopy(t, nil), "scheduler.hcl"), filepath.Join(dir, "scheduler.hcl"))
	waitUntil(t, 10*time.Second, "back to the first version", func() bool { return statusJSON(t, srv)["version"] == v0 })
	if !strings.Contains(srv.logText(), "cause=watch") {
		t.Errorf("server log shows no watched reload:\n%s", srv.logText())
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every running server answers a reload, each for its own directory, and
// `rules status` lists them all with the leader marked.
func TestReloadReachesEveryServer(t *testing.T) {
	dirA, dirB := policyCopy(t, nil), policyCopy(t, nil)
	a, _ := newEngineServer(t, "--policies", dirA)
	b := startServer(t, "--etcd", a.client, "--policies", dirB, "--engine-id", "server-2",
		"--admin-addr", fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)))
	var sts []map[string]any
	waitUntil(t, 10*time.Second, "two servers in rules status", func() bool {
		sts = nil
		return json.Unmarshal([]byte(a.ok(t, "rules", "status", "-o", "json")), &sts) == nil && len(sts) == 2
	})
	if sts[0]["server"] != "server-1" || sts[0]["leading"] != true || sts[1]["server"] != "server-2" || sts[1]["leading"] != false {
		t.Errorf("status of two servers: %v", sts)
	}
	out := a.ok(t, "rules", "status")
	if !strings.Contains(out, "server    server-1 (leader)") || !strings.Contains(out, "server    server-2 (standby)") {
		t.Errorf("rules status:\n%s", out)
	}
	src, err := os.ReadFile(filepath.Join(dirB, "scheduler.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dirB, "scheduler.hcl", scoreLine.ReplaceAllString(string(src), `${1}score = "nope"`))
	r := a.ccattler(t, "rules", "reload")
	if r.code != 1 || !strings.Contains(r.stdout, "server-1: unchanged") || !strings.Contains(r.stdout, "server-2: rejected") ||
		!strings.Contains(r.stderr, filepath.Join(dirB, "scheduler.hcl")+":") {
		t.Errorf("reload with one server's directory broken: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	b.stop(t)
	// Its status goes with its lease: revoked as it stops, or else
	// expired a TTL (10 s) after its last renewal.
	waitUntil(t, 15*time.Second, "the stopped server gone from rules status", func() bool {
		sts = nil
		return json.Unmarshal([]byte(a.ok(t, "rules", "status", "-o", "json")), &sts) == nil && len(sts) == 1
	})
}
