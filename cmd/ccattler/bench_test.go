package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBench runs `ccattler bench` through the binary at a tiny size, every
// phase included, and checks that the figures are there and make sense.
func TestBench(t *testing.T) {
	tiny := []string{"bench", "--nodes", "10", "--instances", "50", "--services", "5", "--changes", "40", "--raw-for", "300ms"}
	memProfile := filepath.Join(t.TempDir(), "mem.out")
	cpuProfile := filepath.Join(t.TempDir(), "change.cpu")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string   // in stderr, for a failure
		stdout []string // in stdout, for a failure
	}{
		{name: "tiny run", args: append(append([]string{}, tiny...), "-o", "json", "--timeout", "2m", "--agent-cache", "--memprofile", memProfile,
			"--cpuprofile", cpuProfile, "--cpuprofile-phase", "change")},
		{name: "phase timeout exits 1, saying how far it got", args: append(append([]string{}, tiny...), "--timeout", "1ms", "-o", "json"), code: 1,
			stderr: "not done within --timeout 1ms", stdout: []string{`"stopped_in"`, `"agent_cache": false`, `"fresh_revision"`}},
		{name: "unknown preset", args: []string{"bench", "--size", "huge"}, code: 2, stderr: `--size "huge": expected small, medium or large`},
		{name: "negative stall", args: []string{"bench", "--stall", "-1s"}, code: 2, stderr: "--stall -1s: expected a positive duration, or 0 for never"},
		{name: "too few nodes", args: []string{"bench", "--nodes", "1"}, code: 2, stderr: "--nodes 1: expected at least 2"},
		{name: "scale-to below -1", args: []string{"bench", "--scale-to", "-2"}, code: 2, stderr: "--scale-to -2: expected -1 (skip) or 0 to 10000"},
		{name: "phase profile without a profile", args: []string{"bench", "--cpuprofile-phase", "delete"}, code: 2, stderr: `--cpuprofile-phase "delete": expected converge, change, scale-down or delete, with --cpuprofile`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if tc.stderr != "" && !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("stderr does not say %q:\n%s", tc.stderr, r.stderr)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(r.stdout, want) {
					t.Fatalf("stdout does not say %q:\n%s", want, r.stdout)
				}
			}
			if tc.code != 0 {
				return
			}
			if !strings.Contains(r.stderr, "bench: converging") {
				t.Errorf("no progress line on stderr:\n%s", r.stderr)
			}
			checkBenchJSON(t, r.stdout)
			if !strings.Contains(r.stdout, `"agent_cache": true`) {
				t.Errorf("--agent-cache is not in the result:\n%s", r.stdout)
			}
			// Both heap profiles, once converged and at the peak, and the
			// change phase's CPU profile are gzipped pprof protos.
			for _, p := range []string{memProfile, memProfile + ".peak", cpuProfile} {
				if b, err := os.ReadFile(p); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
					t.Errorf("%s is not a pprof profile (%d bytes, %v)", p, len(b), err)
				}
			}
		})
	}
}

// --cpuprofile-phase converge profiles the converge alone: the process's
// work shows in it, the raw etcd put loop after it does not.
func TestBenchProfilesTheConverge(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "converge.cpu")
	r := run(t, "bench", "--nodes", "10", "--instances", "300", "--services", "3", "--changes", "0", "--no-recovery",
		"--raw-for", "500ms", "--timeout", "2m", "--cpuprofile", prof, "--cpuprofile-phase", "converge")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(prof)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s is not a gzipped pprof profile: %v", prof, err)
	}
	p, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(p, []byte("github.com/ccattler/ccattler/")) {
		t.Errorf("the converge's profile (%d bytes) has no sample of CCattler's code", len(p))
	}
	if bytes.Contains(p, []byte("main.rawPuts")) {
		t.Errorf("the converge's profile has samples of the raw put loop, which runs after it")
	}
}

// An interrupted bench stops in its change phase, exits 1 saying so, and
// leaves none of its etcd data in the temporary directory.
func TestBenchInterruptedLeavesNoData(t *testing.T) {
	tmp := t.TempDir()
	b := startBin(t, []string{"TMPDIR=" + tmp}, "bench", "--nodes", "3", "--instances", "9", "--services", "3", "--changes", "1000000",
		"--no-recovery", "--raw-for", "300ms")
	waitUntil(t, 60*time.Second, "bench in its change phase", func() bool { return strings.Contains(b.dump(), "bench: one-fact changes") })
	if left, _ := filepath.Glob(filepath.Join(tmp, "ccattler-bench-*")); len(left) != 1 {
		t.Fatalf("the running bench's data is not in TMPDIR %s: %v", tmp, left)
	}
	b.interrupt(t)
	if code := b.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want 1:\n%s", code, b.dump())
	}
	if !strings.Contains(b.dump(), "error: interrupted: the figures are those measured so far") {
		t.Errorf("the interrupted bench did not say so:\n%s", b.dump())
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the interrupted bench left %d entries in TMPDIR, %s first", len(left), left[0].Name())
	}
}

// TestBenchRemovals runs the bench's removal phases at a tiny size: every
// service scaled from 10 instances to 1, then every service deleted, and
// checks what they count against what the policies must do: one stop per
// extra, by stop_placed_extras, then one per remaining instance, by
// stop_deleted, each stop noted by gc's note_stopped. The engine resyncs
// at rest between the phases: the default policies' incremental rounds
// must have left it nothing to fire.
func TestBenchRemovals(t *testing.T) {
	r := run(t, "bench", "--nodes", "3", "--instances", "50", "--services", "5", "--changes", "0", "--no-recovery",
		"--raw-for", "300ms", "--scale-to", "1", "--delete", "--timeout", "2m", "--resync-every", "1s", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var res benchResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	for _, c := range []struct {
		name      string
		r         *shrinkResult
		rule      string
		stops     int
		remaining int
	}{{"scale_down", res.ScaleDown, "stop_placed_extras", 45, 5}, {"delete", res.Delete, "stop_deleted", 5, 0}} {
		if c.r == nil {
			t.Fatalf("%s: missing from the result:\n%s", c.name, r.stdout)
		}
		if got := c.r.FiringsByRule[c.rule]; got != int64(c.stops) {
			t.Errorf("%s: %s fired %d times, want %d (one per stop): %v", c.name, c.rule, got, c.stops, c.r.FiringsByRule)
		}
		if c.r.Stopped != c.stops || c.r.FiringsByRule["note_stopped"] != int64(c.stops) {
			t.Errorf("%s: %d stopped and %d stops noted, want %d of each", c.name, c.r.Stopped, c.r.FiringsByRule["note_stopped"], c.stops)
		}
		if c.r.StopTransactions < 1 || c.r.StopTransactions > 2 {
			t.Errorf("%s: a service's stops in %d transactions, want 1 (2 if it met a report in flight)", c.name, c.r.StopTransactions)
		}
		if c.r.Seconds <= 0 || c.r.EngineRounds < 1 || c.r.EngineEvalSeconds <= 0 {
			t.Errorf("%s: %+v: want a positive time, rounds and evaluation", c.name, c.r)
		}
	}
	if res.EngineResyncRounds < 1 || res.EngineResyncFirings != 0 {
		t.Errorf("%d resyncs at rest found %d missed firings (%v): want at least one resync, and nothing missed",
			res.EngineResyncRounds, res.EngineResyncFirings, res.EngineResyncFiringsByRule)
	}
	if !strings.Contains(r.stderr, "bench: scaling down") || !strings.Contains(r.stderr, "bench: deleting") {
		t.Errorf("no progress lines for the removal phases:\n%s", r.stderr)
	}
}

func checkBenchJSON(t *testing.T, out string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	num := func(k string) float64 {
		v, ok := m[k].(float64)
		if !ok {
			t.Errorf("%s: missing or not a number: %v", k, m[k])
		}
		return v
	}
	// The server's GOGC, unless the test's environment sets one.
	gcLo, gcHi := float64(serverGCPercent), float64(serverGCPercent)
	if os.Getenv("GOGC") != "" {
		gcLo, gcHi = -1, 1e9
	}
	checks := []struct {
		field  string
		lo, hi float64
	}{
		{"nodes", 10, 10},
		{"instances", 50, 50},
		{"services", 5, 5},
		{"converge_seconds", 0.001, 60},
		{"instances_per_second", 0.5, 1e7},
		{"keys_written", 50 * 4, 1e6}, // at least service, state, placement and endpoint of each instance
		{"keys_per_second", 1, 1e8},
		{"raw_etcd_keys_per_second", 100, 1e8},
		{"ratio_to_raw", 1e-6, 100},
		{"changes", 40, 40},
		{"change_p50_ms", 0.01, 10000},
		{"change_p99_ms", 0.01, 10000},
		{"killed_nodes", 1, 1},
		{"lost_instances", 1, 50},
		// The failure policy waits 12s of the server's clock, which ticks
		// in whole seconds.
		{"grace_seconds", 10, 60},
		{"recovery_seconds", 10, 120},
		{"bytes_per_fact", 100, 600}, // weighed alone in a child process: the table's own, about 270
		{"peak_rss_bytes", 1 << 20, 1 << 40},
		{"converge_peak_rss_bytes", 1 << 20, 1 << 40},
		{"peak_live_heap_bytes", 1 << 20, 1 << 40},
		{"converge_peak_live_heap_bytes", 1 << 20, 1 << 40},
		{"converged_live_heap_bytes", 1 << 20, 1 << 40},
		{"converged_rss_anon_bytes", 1 << 20, 1 << 40},
		{"converged_rss_file_bytes", 1 << 20, 1 << 40}, // the binary's pages at least
		{"converged_stack_bytes", 64 << 10, 1 << 30},
		{"converged_goroutines", 10 * 3, 1e6}, // three a simulated node
		{"gc_percent", gcLo, gcHi},
		{"memory_limit_bytes", 1 << 20, 1 << 63},
	}
	for _, c := range checks {
		if v := num(c.field); v < c.lo || v > c.hi {
			t.Errorf("%s = %v, want %v..%v", c.field, v, c.lo, c.hi)
		}
	}
	// Peaks only grow: up to convergence is at most the whole run's.
	if c, w := num("converge_peak_rss_bytes"), num("peak_rss_bytes"); c > w {
		t.Errorf("converge_peak_rss_bytes %v > peak_rss_bytes %v", c, w)
	}
	if c, w := num("converge_peak_live_heap_bytes"), num("peak_live_heap_bytes"); c > w {
		t.Errorf("converge_peak_live_heap_bytes %v > peak_live_heap_bytes %v", c, w)
	}
	// The first tenth runs before the last one starts: both paces are
	// positive; the engine's phases fit in the convergence they divide.
	if num("pace_first_tenth") <= 0 || num("pace_last_tenth") <= 0 {
		t.Errorf("pace_first_tenth %v, pace_last_tenth %v: want both positive", num("pace_first_tenth"), num("pace_last_tenth"))
	}
	if num("engine_evaluate_seconds") <= 0 || num("agent_commit_seconds") <= 0 {
		t.Errorf("engine_evaluate_seconds %v, agent_commit_seconds %v: the engine evaluated and the agents committed",
			num("engine_evaluate_seconds"), num("agent_commit_seconds"))
	}
	phases := num("engine_evaluate_seconds") + num("engine_apply_seconds") + num("engine_watch_wait_seconds") + num("engine_idle_seconds")
	if c := num("converge_seconds"); phases < c*0.99 || phases > c*1.5+1 {
		t.Errorf("the engine's phases add up to %vs, want about the %vs to converge", phases, c)
	}
	if p50, p99 := num("change_p50_ms"), num("change_p99_ms"); p99 < p50 {
		t.Errorf("change_p99_ms %v < change_p50_ms %v", p99, p50)
	}
	// Each flip includes its own write (a write is done by the time what it
	// caused is seen, the wait for its answer aside): so do its quantiles.
	if w50, w99 := num("change_write_p50_ms"), num("change_write_p99_ms"); w50 <= 0 || w99 < w50 || w50 > num("change_p50_ms") || w99 > num("change_p99_ms") {
		t.Errorf("change_write_p50_ms %v, change_write_p99_ms %v: want 0 < p50 <= p99, each at most the flip's (%v, %v)",
			w50, w99, num("change_p50_ms"), num("change_p99_ms"))
	}
	// Every flip is evaluated and committed by the engine.
	if ev, ap := num("change_engine_evaluate_ms"), num("change_engine_apply_ms"); ev <= 0 || ap <= 0 || num("change_engine_watch_wait_ms") < 0 {
		t.Errorf("change_engine_evaluate_ms %v, change_engine_apply_ms %v, change_engine_watch_wait_ms %v: the engine evaluated and committed every flip",
			ev, ap, num("change_engine_watch_wait_ms"))
	}
	if c, ap := num("change_engine_commit_ms"), num("change_engine_apply_ms"); c <= 0 || c > ap {
		t.Errorf("change_engine_commit_ms %v: want more than 0, at most the %v applying", c, ap)
	}
	if n := num("change_engine_transactions"); n < 39 {
		t.Errorf("change_engine_transactions %v for 40 flips", n)
	}
	// Each flip is at least one round, and moves one endpoint (the last
	// flip's firing may be counted only after the phase, when its commit
	// returns).
	if n := num("change_engine_rounds"); n < 39 {
		t.Errorf("change_engine_rounds %v for 40 flips", n)
	}
	// The collector's part of the CPU, in seconds like it: a converge this
	// short may end before a collection does (GOGC=200), so none is a
	// figure too.
	if gc, cpu := num("gc_cpu_seconds"), num("cpu_seconds"); gc < 0 || gc >= cpu {
		t.Errorf("gc_cpu_seconds %v: want at least 0 and less than cpu_seconds %v", gc, cpu)
	}
	// The evaluator's work, counted: at least a task per instance (its
	// placement), aggregates computed, served and adjusted (the
	// scheduler's counts, each placement adjusts them), candidates served
	// again (instances of a service visit the same nodes), tasks not
	// run (a report reaches the rules about failed instances too), and
	// the engine's own writes come back as planned (every placement).
	if w, _ := m["engine_work"].(map[string]any); w == nil {
		t.Errorf("engine_work missing: %v", m["engine_work"])
	} else {
		for _, k := range []string{"tasks", "cel_evaluations", "facts_visited", "aggregates_computed", "aggregate_hits", "aggregate_adjustments", "candidates_reused", "tasks_needless", "writes_come_back"} {
			if v, _ := w[k].(float64); v <= 0 {
				t.Errorf("engine_work.%s = %v: want more than 0", k, w[k])
			}
		}
		if v, _ := w["tasks"].(float64); v < num("instances") {
			t.Errorf("engine_work.tasks %v: want at least one per instance (%v)", v, num("instances"))
		}
	}
	checkBenchRounds(t, m, num("converge_seconds"), num("instances"))
	checkBenchStages(t, m, num("converge_seconds"))
	// The converge's firings by rule add up to its firings, place each
	// instance once and publish its endpoint once.
	// The counters are read once the engine committed what the tracker saw:
	// the endpoints it waited for are all counted.
	if by, _ := m["engine_firings_by_rule"].(map[string]any); by == nil || by["schedule"] != num("instances") || by["publish_endpoint"] != num("instances") {
		t.Errorf("engine_firings_by_rule %v: want schedule and publish_endpoint once per instance (%v)", m["engine_firings_by_rule"], num("instances"))
	} else {
		sum := 0.0
		for _, n := range by {
			sum += n.(float64)
		}
		if sum != num("engine_firings") {
			t.Errorf("engine_firings_by_rule adds up to %v, engine_firings is %v", sum, num("engine_firings"))
		}
	}
	// Ten nodes, five services of ten: the scheduler spreads each service
	// one to a node (it scores every node: fewer than its sample).
	if e, lo, hi := num("spread_excess_instances"), num("node_instances_min"), num("node_instances_max"); e != 0 || lo != 5 || hi != 5 || num("node_instances_cv") != 0 {
		t.Errorf("placement: %v instances beyond an even spread, %v-%v a node (cv %v); want 0, 5-5, 0", e, lo, hi, num("node_instances_cv"))
	}
	if by, _ := m["change_firings_by_rule"].(map[string]any); by == nil || by["publish_endpoint"] == nil || by["publish_endpoint"].(float64) < 39 || by["publish_endpoint"].(float64) > 40 {
		t.Errorf("change_firings_by_rule %v: want publish_endpoint once per flip", m["change_firings_by_rule"])
	}
	if r, g := num("recovery_seconds"), num("grace_seconds"); r < g {
		t.Errorf("recovery_seconds %v < grace_seconds %v", r, g)
	}
	if want := num("keys_per_second") / num("raw_etcd_keys_per_second"); !near(num("ratio_to_raw"), want) {
		t.Errorf("ratio_to_raw %v, want keys_per_second/raw_etcd_keys_per_second = %v", num("ratio_to_raw"), want)
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9*max(1, b) && -d < 1e-9*max(1, b) }

// checkBenchRounds checks the converge's timeline: rounds in the order
// they began, within the converge, each one's firings its rules' sum, and
// among them the planned placement and creation of every instance (each
// instance ran before convergence, so its firings were planned before).
func checkBenchRounds(t *testing.T, m map[string]any, converge, instances float64) {
	t.Helper()
	rounds, _ := m["rounds"].([]any)
	if len(rounds) == 0 {
		t.Errorf("rounds: %v, want the converge's rounds", m["rounds"])
		return
	}
	byRule := map[string]float64{}
	last := -1.0
	for i, x := range rounds {
		r, _ := x.(map[string]any)
		at, _ := r["at_seconds"].(float64)
		took, _ := r["took_seconds"].(float64)
		firings, _ := r["firings"].(float64)
		if at < last || at > converge || took <= 0 || took > converge {
			t.Errorf("round %d: at %vs, took %vs: want in order (after %vs), within the %vs converge", i, at, took, last, converge)
		}
		last = at
		sum := 0.0
		by, _ := r["firings_by_rule"].(map[string]any)
		for rule, n := range by {
			v, _ := n.(float64)
			sum += v
			byRule[rule] += v
		}
		if sum != firings {
			t.Errorf("round %d: %v firings, its rules' add up to %v: %v", i, firings, sum, by)
		}
	}
	if byRule["schedule"] < instances || byRule["create_instances"] < instances {
		t.Errorf("the rounds planned %v placements and %v creations for %v instances: %v", byRule["schedule"], byRule["create_instances"], instances, byRule)
	}
}

// checkBenchStages checks the instances' way in its four stages: each
// stage's quantiles in order, every one within the converge (each stage is
// part of an instance's way from the apply to its endpoint, which ended by
// convergence). TestTrackerStages checks the figures themselves.
func checkBenchStages(t *testing.T, m map[string]any, converge float64) {
	t.Helper()
	stages, _ := m["stages"].([]any)
	want := []string{"apply → created", "created → placed", "placed → running healthy", "running healthy → endpoint"}
	if len(stages) != len(want) {
		t.Fatalf("stages: %v, want the %d of %v", m["stages"], len(want), want)
	}
	for i, x := range stages {
		st, _ := x.(map[string]any)
		p50, _ := st["p50_seconds"].(float64)
		p90, _ := st["p90_seconds"].(float64)
		hi, _ := st["max_seconds"].(float64)
		if st["stage"] != want[i] {
			t.Errorf("stage %d is %v, want %q", i, st["stage"], want[i])
		}
		if p50 < 0 || p90 < p50 || hi < p90 || hi > converge {
			t.Errorf("stage %q: p50 %v, p90 %v, max %v: want 0 <= p50 <= p90 <= max <= the converge's %vs", want[i], p50, p90, hi, converge)
		}
	}
}
