package agent

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// reportNode is a node with a lease and no runtime, whose report is read
// without etcd: changes is what report would write.
func reportNode(tb testing.TB) *node {
	tb.Helper()
	store := &facts.Store{Schema: facts.Default}
	log := slog.New(slog.DiscardHandler)
	a := &Agent{cfg: Config{Store: store, Log: log}, feed: NewFeed(store, log), link: &link{}}
	n := newNode(a, NodeConfig{ID: "node-1", CPU: 8, Memory: 8 << 30, Architecture: "amd64", Zone: "z1", Address: "10.0.0.1"})
	n.lease = 1
	n.wants, n.actual = map[string]*Want{}, map[string]*Status{}
	return n
}

func (n *node) run1(id string) {
	spec := Spec{Image: "nginx:1.28", CPU: 0.5, Memory: 64 << 20, Digest: "2f5fe11ad9e492f8"}
	n.wants[id] = &Want{Spec: spec}
	n.actual[id] = &Status{Spec: spec, Image: "docker.io/library/nginx:1.28", IP: "10.88.0.2", Running: true,
		StartedAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Health: Healthy}
}

// written is what changes would write, as key -> value, and commits it
// when commit says so.
func written(n *node, commit bool) map[string]string {
	ops, done := n.changes()
	out := map[string]string{}
	for _, op := range ops {
		out[op.Key] = string(op.Value)
	}
	if !slices.IsSortedFunc(ops, func(a, b facts.Op) int { return strings.Compare(a.Key, b.Key) }) {
		panic("report's writes are not sorted by key")
	}
	if commit && done != nil {
		done()
	}
	return out
}

func keysOf(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// TestReportWritesWhatChanged checks what a node's report writes as its
// instances change: every fact once, then only what changed; a stopped
// instance's state once, then nothing of it; a fact dropped and stated
// again, or an instance forgotten and placed again, written again; all of
// it again after a reconnect; nothing lost when a write fails.
func TestReportWritesWhatChanged(t *testing.T) {
	n := reportNode(t)
	n.run1("a0001")
	n.wants["b0002"] = &Want{Spec: Spec{Image: "nginx:9", Digest: "0123456789abcdef"}}
	exit := uint32(3)
	n.failed["b0002"] = &failure{reason: "exited with status 3", exit: &exit}
	n.wants["c0003"] = &Want{Spec: Spec{Image: "nginx:1.28"}} // starting: nothing to say yet

	first := written(n, true)
	for _, k := range []string{
		"observed/instance/a0001/node", "observed/instance/a0001/state", "observed/instance/a0001/image",
		"observed/instance/a0001/ip", "observed/instance/a0001/health", "observed/instance/a0001/started_at",
		"observed/instance/a0001/resources/cpu", "observed/instance/a0001/resources/memory", "observed/instance/a0001/spec_digest",
		"observed/instance/b0002/node", "observed/instance/b0002/state", "observed/instance/b0002/health",
		"observed/instance/b0002/image", "observed/instance/b0002/spec_digest", "observed/instance/b0002/reason",
		"observed/instance/b0002/exit_status",
		facts.NodeState("node-1"), facts.NodeCapacityCPU("node-1"), facts.NodeAddress("node-1"),
		facts.NodeAvailableCPU("node-1"), facts.NodeAvailableMemory("node-1"),
	} {
		if _, ok := first[k]; !ok {
			t.Errorf("first report lacks %s; it wrote %v", k, keysOf(first))
		}
	}
	for k := range first {
		if facts.InstanceAttr("c0003", "") <= k && k < facts.InstanceAttr("c0003", "~") {
			t.Errorf("first report wrote %s of an instance still starting", k)
		}
	}
	if got := first["observed/instance/a0001/state"]; got != `"running"` {
		t.Errorf("a0001 state = %s", got)
	}
	if got := first["observed/instance/b0002/exit_status"]; got != "3" {
		t.Errorf("b0002 exit_status = %s", got)
	}
	if got := first[facts.NodeAvailableCPU("node-1")]; got != "7.5" {
		t.Errorf("available cpu = %s, want 7.5", got)
	}
	if again := written(n, true); len(again) != 0 {
		t.Fatalf("a report with nothing changed wrote %v", keysOf(again))
	}

	st := n.actual["a0001"]
	st.Health = Unhealthy
	if got := written(n, true); len(got) != 1 || got["observed/instance/a0001/health"] != `"unhealthy"` {
		t.Errorf("one health change wrote %v", got)
	}

	// A failed write loses nothing: the next report writes the same.
	n.run1("c0003")
	lost := written(n, false)
	if got := written(n, true); !maps.Equal(got, lost) || len(got) == 0 {
		t.Errorf("after a failed write the report wrote %v, want %v", keysOf(got), keysOf(lost))
	}
	if _, ok := lost[facts.NodeAvailableCPU("node-1")]; !ok {
		t.Errorf("a started instance did not change what the node has available: %v", keysOf(lost))
	}

	// A fact no longer stated is forgotten, and written again when stated again.
	st = n.actual["a0001"]
	st.IP = ""
	if got := written(n, true); len(got) != 0 {
		t.Errorf("dropping a0001's address wrote %v", keysOf(got))
	}
	st.IP = "10.88.0.2"
	if got := written(n, true); len(got) != 1 || got["observed/instance/a0001/ip"] != `"10.88.0.2"` {
		t.Errorf("stating a0001's address again wrote %v", got)
	}

	// Stopped: its state once, then nothing; placed again: everything again.
	delete(n.wants, "a0001")
	delete(n.actual, "a0001")
	n.stopped["a0001"] = true
	got := written(n, true)
	if got["observed/instance/a0001/state"] != `"stopped"` || got["observed/instance/a0001/health"] != `"unknown"` {
		t.Errorf("stopping a0001 wrote %v", got)
	}
	if len(n.stopped) != 0 || len(n.stated) != 2 {
		t.Errorf("after the stop was written: stopped %v, %d instances stated, want b0002 and c0003", n.stopped, len(n.stated))
	}
	if again := written(n, true); len(again) != 0 {
		t.Errorf("a report after the stop wrote %v", keysOf(again))
	}
	n.run1("a0001")
	if got := written(n, true); len(got) < 9 {
		t.Errorf("a0001 placed again wrote %v, want all nine of its facts", keysOf(got))
	}

	// A reconnect writes everything again.
	n.a.link.epoch.Add(1)
	if got := written(n, true); len(got) < len(first) {
		t.Errorf("after a reconnect the report wrote %d facts, want at least %d", len(got), len(first))
	}
}

// BenchmarkReport is a node's report after one instance's health changed,
// on nodes of 1,000 and 30,000 running instances, and the full report after
// a reconnect as the baseline in the same run: a report costs what changed,
// plus one comparison of a small value per instance.
func BenchmarkReport(b *testing.B) {
	for _, size := range []int{1000, 30000} {
		b.Run(fmt.Sprintf("instances=%d", size), func(b *testing.B) {
			n := reportNode(b)
			ids := make([]string, size)
			for i := range ids {
				ids[i] = fmt.Sprintf("a%05x", i)
				n.run1(ids[i])
			}
			written(n, true)
			const fulls = 5
			start := time.Now()
			for range fulls {
				n.a.link.epoch.Add(1)
				written(n, true)
			}
			full := float64(time.Since(start).Nanoseconds()) / fulls
			b.ResetTimer()
			for i := range b.N {
				id := ids[i%size]
				st := n.actual[id]
				st.Health = map[bool]string{true: Healthy, false: Unhealthy}[st.Health != Healthy]
				ops, done := n.changes()
				if len(ops) != 1 {
					b.Fatalf("one change wrote %d facts", len(ops))
				}
				done()
			}
			b.StopTimer()
			one := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(full/1e6, "ms/full-report")
			b.ReportMetric(full/one, "full/one")
		})
	}
}

// TestSaveCacheWithoutCacheEncodesNothing checks that a node that keeps no
// cache, or whose placements did not come from etcd, pays nothing for the
// cache at a wake-up: encoding every placement to compare it with the file
// was a quarter of a simulated node's work at 30,000 instances. One that
// keeps a cache still saves it, and rewrites it only when it changed.
func TestSaveCacheWithoutCacheEncodesNothing(t *testing.T) {
	n := reportNode(t)
	for i := range 1000 {
		n.run1(fmt.Sprintf("a%05x", i))
	}
	for _, c := range []struct {
		name string
		path string
		live bool
	}{{"no cache", "", true}, {"not from etcd", t.TempDir() + "/cache.json", false}} {
		n.path, n.live = c.path, c.live
		if allocs := testing.AllocsPerRun(10, n.saveCache); allocs != 0 {
			t.Errorf("%s: saveCache allocated %v times for 1,000 placements, want 0", c.name, allocs)
		}
		if n.savedSum != ([sha256.Size]byte{}) {
			t.Errorf("%s: saveCache saved", c.name)
		}
	}
	// A node that keeps one, with placements from etcd, writes it once,
	// and again only when what it holds changed.
	n.path, n.live = t.TempDir()+"/cache.json", true
	n.saveCache()
	body, ok, err := loadCache(n.path)
	if err != nil || !ok || len(body.Instances) != 1000 {
		t.Fatalf("the cache saved holds %d placements (%v, %v), want 1,000", len(body.Instances), ok, err)
	}
	saved := body.SavedAt
	n.saveCache()
	if body, _, _ := loadCache(n.path); !body.SavedAt.Equal(saved) {
		t.Errorf("an unchanged cache was rewritten at %v (first saved at %v)", body.SavedAt, saved)
	}
	n.run1("b00000")
	n.saveCache()
	if body, _, _ := loadCache(n.path); len(body.Instances) != 1001 {
		t.Errorf("after a new placement the cache holds %d, want 1,001", len(body.Instances))
	}
}
