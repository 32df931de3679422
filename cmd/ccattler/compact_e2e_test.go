package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// compactRevision is the server's etcd's compact revision (1: never compacted).
func compactRevision(t *testing.T, st *facts.Store) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := st.CompactRevision(ctx)
	if err != nil {
		t.Fatalf("read the compact revision: %v", err)
	}
	return rev
}

var compactedLine = regexp.MustCompile(`msg="etcd compacted" rev=(\d+) took=\S+ kept=2s`)

// Only the leading engine's server compacts: a standby with a short
// --compact-every compacts nothing while another server leads, and once it
// takes over it compacts every interval, logging each compaction with its
// revision and counting it on /metrics.
func TestOnlyTheLeaderCompacts(t *testing.T) {
	// The fact store serves on its own, so that it outlives the engines.
	base := newServer(t, t.TempDir())
	if !strings.Contains(base.logText(), "--no-engine: this server does not compact") {
		t.Errorf("a --no-engine server does not say it leaves compaction to the engine's:\n%s", base.logText())
	}
	engineServer := func(id, every string) (*server, string) {
		admin := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
		return startServer(t, "--etcd", base.client, "--engine-id", id, "--admin-addr", admin, "--compact-every", every), admin
	}
	a, _ := engineServer("server-1", "0")
	waitUntil(t, 20*time.Second, "server-1 leading", func() bool { return strings.Contains(a.logText(), "engine: leading") })
	b, adminB := engineServer("server-2", "2s")
	st := base.dial(t)
	var sts []map[string]any
	waitUntil(t, 20*time.Second, "server-1 leading, server-2 standing by", func() bool {
		sts = nil
		return json.Unmarshal([]byte(base.ok(t, "rules", "status", "-o", "json")), &sts) == nil && len(sts) == 2 &&
			sts[0]["server"] == "server-1" && sts[0]["leading"] == true
	})
	if !strings.Contains(a.logText(), "--compact-every 0: etcd's history is never compacted") {
		t.Errorf("server-1 does not say it never compacts:\n%s", a.logText())
	}
	// Three of the standby's intervals: it would have compacted twice.
	time.Sleep(6 * time.Second)
	if rev := compactRevision(t, st); rev != 1 {
		t.Errorf("compact revision %d while server-1 (--compact-every 0) leads: something compacted", rev)
	}
	if compactedLine.MatchString(b.logText()) {
		t.Errorf("the standby compacted:\n%s", b.logText())
	}
	if m := scrape(t, adminB); m["ccattler_etcd_compactions_total"] != 0 {
		t.Errorf("the standby counts %v compactions", m["ccattler_etcd_compactions_total"])
	}

	a.stop(t) // it resigns: server-2 leads at once
	var rev int64
	waitUntil(t, 60*time.Second, "server-2 compacting", func() bool {
		rev = compactRevision(t, st)
		return rev > 1 && len(compactedLine.FindAllString(b.logText(), -1)) >= 2
	})
	logged := compactedLine.FindAllStringSubmatch(b.logText(), -1)
	last, _ := strconv.ParseInt(logged[len(logged)-1][1], 10, 64)
	if last > compactRevision(t, st) {
		t.Errorf("server-2 logged a compaction to %d; etcd's compact revision is %d", last, compactRevision(t, st))
	}
	// At least one interval stays readable: the clock ticks every second,
	// so two compactions apart the revision has moved past the target.
	cur, err := st.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cur <= compactRevision(t, st) {
		t.Errorf("compacted up to the current revision %d: no history kept", cur)
	}
	m := scrape(t, adminB)
	if m["ccattler_etcd_compactions_total"] < 2 || m["ccattler_etcd_compact_revision"] < float64(last) || m["ccattler_etcd_compaction_failures_total"] != 0 ||
		m["ccattler_etcd_compaction_duration_seconds_count"] != m["ccattler_etcd_compactions_total"] {
		t.Errorf("server-2's compaction metrics: total %v, revision %v (logged %d), failures %v, duration count %v",
			m["ccattler_etcd_compactions_total"], m["ccattler_etcd_compact_revision"], last,
			m["ccattler_etcd_compaction_failures_total"], m["ccattler_etcd_compaction_duration_seconds_count"])
	}
}

// After the history a firing read is compacted, why still prints the
// firing records and the values that are still current, marks those gone,
// names the compact revision and the flag, and exits 1; the engine and the
// nodes' agents, whose watches the compaction passed under, go on
// converging.
func TestWhyAfterCompaction(t *testing.T) {
	srv, _ := newEngineServer(t, "--compact-every", "2s")
	startSimNodes(t, srv, 3, "node-")
	srv.ok(t, "apply", "-f", webExample)
	var eps map[string]string
	var revs map[string]int64
	waitUntil(t, 60*time.Second, "3 endpoints of web", func() bool {
		eps, revs, _ = srv.factsUnder(t, "endpoint/service/web/")
		return len(eps) == 3
	})
	var key string
	for k := range eps {
		key = k
		break
	}
	st := srv.dial(t)
	waitUntil(t, 60*time.Second, "history compacted past the endpoint's firing", func() bool {
		return compactRevision(t, st) > revs[key]
	})

	r := srv.ccattler(t, "why", key)
	if r.code != 1 {
		t.Fatalf("why %s after compaction: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", key, r.code, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, key+" = ") || !strings.Contains(r.stdout, "rule publish_endpoint") ||
		!strings.Contains(r.stdout, "rule schedule") || !strings.Contains(r.stdout, "(value compacted)") {
		t.Errorf("why %s after compaction does not print what it still can:\n%s", key, r.stdout)
	}
	m := regexp.MustCompile(`etcd's history before revision (\d+) was compacted`).FindStringSubmatch(r.stderr)
	if m == nil || !strings.Contains(r.stderr, "--compact-every") {
		t.Fatalf("why's error does not name the compact revision and the flag:\n%s", r.stderr)
	}
	named, _ := strconv.ParseInt(m[1], 10, 64)
	if named <= revs[key] || named > compactRevision(t, st) {
		t.Errorf("why names revision %d; the endpoint was written at %d, etcd's compact revision is %d", named, revs[key], compactRevision(t, st))
	}
	if strings.Contains(r.stderr, "rpc error") || strings.Contains(r.stderr, "etcdserver:") {
		t.Errorf("why passes on etcd's raw error:\n%s", r.stderr)
	}

	r = srv.ccattler(t, "why", key, "-o", "json")
	var g struct {
		Nodes []struct {
			ID        string `json:"id"`
			Compacted int64  `json:"compacted_before"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &g); r.code != 1 || err != nil {
		t.Fatalf("why -o json after compaction: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	marked := 0
	for _, n := range g.Nodes {
		if n.Compacted > 0 {
			marked++
		}
	}
	if marked == 0 {
		t.Errorf("why -o json marks no node compacted_before: %s", r.stdout)
	}

	// A watch from a compacted revision says so, not in etcd's words.
	r = srv.ccattler(t, "facts", "watch", "desired/", "--rev", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "etcd's history before revision") || !strings.Contains(r.stderr, "give --rev") {
		t.Errorf("facts watch --rev 1 after compaction: exit %d\n%s", r.code, r.stderr)
	}

	// The engine and the agents keep going: two more instances run and publish.
	srv.ok(t, "scale", "service", "web", "5", "--wait", "--timeout", "60s")
	waitFleet(t, srv, "web", 5)
	waitUntil(t, 60*time.Second, "5 endpoints of web", func() bool {
		eps, _, _ = srv.factsUnder(t, "endpoint/service/web/")
		return len(eps) == 5
	})
}

// A careless --resync-every is a usage error naming the flag, before
// anything starts.
func TestResyncEveryUsage(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"server", "bench"} {
		for _, v := range []string{"-1s", "banana"} {
			args := []string{cmd, "--resync-every", v}
			if cmd != "bench" {
				args = append(args, "--data-dir", dir)
			}
			r := run(t, args...)
			if r.code != 2 || !strings.Contains(r.stderr, `"--resync-every"`) || !strings.Contains(r.stderr, "expected a duration") ||
				strings.Contains(r.stderr, "etcd") {
				t.Errorf("%s --resync-every %s: exit %d, want 2 naming the flag before etcd starts\n%s", cmd, v, r.code, r.stderr)
			}
		}
	}
}

// A careless --compact-every is a usage error naming the flag, before
// anything starts.
func TestCompactEveryUsage(t *testing.T) {
	dir := t.TempDir()
	for _, cmd := range []string{"server", "dev", "bench"} {
		for _, v := range []string{"-1s", "banana", "10ms"} {
			args := []string{cmd, "--compact-every", v}
			if cmd != "bench" {
				args = append(args, "--data-dir", dir)
			}
			r := run(t, args...)
			if r.code != 2 || !strings.Contains(r.stderr, `"--compact-every"`) || !strings.Contains(r.stderr, "expected") {
				t.Errorf("%s --compact-every %s: exit %d, want 2 naming the flag\n%s", cmd, v, r.code, r.stderr)
			}
		}
	}
}
