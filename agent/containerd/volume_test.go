package containerd_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/containerd"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestVolumeOutlivesInstance runs the agent with real containerd and etcd: an
// instance of a service with a volume writes to it; once it is stopped, its
// replacement on the same node reads what it wrote. The agent reports where
// the volume is attached, and that it is detached between the two; once the
// volume is not persistent, its data goes with its last instance.
func TestVolumeOutlivesInstance(t *testing.T) {
	d := startDaemon(t)
	imgDir, stateDir := t.TempDir(), t.TempDir()
	writeImage(t, filepath.Join(imgDir, "vol.tar"), "ccattler.test/vol:1", buildProgram(t, "testdata/volume.go.txt"))
	e := etcdtest.Start(t)
	s := e.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	rcfg := containerd.NewConfig()
	rcfg.Address, rcfg.Namespace, rcfg.Address4, rcfg.ImageDir, rcfg.Log = d.sock, d.namespace, "127.0.0.1", imgDir, log
	rcfg.VolumeDir = filepath.Join(stateDir, "volumes")
	if sn := os.Getenv("CCATTLER_SNAPSHOTTER"); sn != "" {
		rcfg.Snapshotter = sn
	}
	rt, err := containerd.New(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cfg := agent.NewConfig()
	cfg.Store, cfg.StateDir, cfg.Log = s, stateDir, log
	cfg.Resync, cfg.Probe, cfg.Grace = 300*time.Millisecond, 300*time.Millisecond, 3*time.Second
	nodes := []agent.NodeConfig{{ID: "node-1", CPU: 2, Memory: 1 << 30, Architecture: "amd64", Zone: "test-1", Runtime: rt}}
	a, err := agent.New(cfg, nodes)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	go (&agent.Volumes{Store: s, Nodes: nodes, Interval: 200 * time.Millisecond, Log: log}).Run(ctx)
	defer func() {
		cancel()
		<-done
		for _, id := range []string{"f00a1", "f00b2"} {
			_ = rt.Stop(context.Background(), id, time.Second)
		}
	}()

	port := etcdtest.FreePort(t)
	put(t, s, facts.DesiredService("db"), map[string]any{}, facts.ServiceImage("db"), "ccattler.test/vol:1",
		facts.ServiceExpose("db", port), map[string]any{}, facts.ServiceVolume("db"), "data")
	get := func(path string) (string, error) {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("%s: %s %s", path, resp.Status, b)
		}
		return string(b), err
	}
	running := func(id string) func() string {
		return func() string {
			st, _ := observed(t, s, id, "state")
			h, _ := observed(t, s, id, "health")
			if st != "running" || h != "healthy" {
				return fmt.Sprintf("%s: state %q health %q", id, st, h)
			}
			return ""
		}
	}
	volume := func(node, state string) func() string {
		return func() string {
			got, _, _ := s.Get(ctx, facts.VolumeAttachedNode("data"))
			gs, _, _ := s.Get(ctx, facts.VolumeState("data"))
			if string(got.Value) != `"`+node+`"` || string(gs.Value) != `"`+state+`"` {
				return fmt.Sprintf("volume data: attached_node %s state %s, want %s %s", got.Value, gs.Value, node, state)
			}
			return ""
		}
	}

	put(t, s, facts.InstanceService("f00a1"), "db", facts.Placement("f00a1"), "node-1", facts.NodePlacement("node-1", "f00a1"), "db")
	waitFor(t, 60*time.Second, running("f00a1"))
	waitFor(t, 10*time.Second, volume("node-1", "attached"))
	first, err := get("/me")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(stateDir, "volumes", "data", "log")); err != nil || strings.TrimSpace(string(b)) != first {
		t.Fatalf("the volume's directory under the state dir holds %q (%v), want the first instance's %q", b, err, first)
	}

	// The first instance stops (same port: host networking); its replacement
	// starts on the same node.
	if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement("f00a1")), facts.Delete(facts.NodePlacement("node-1", "f00a1"))}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() string {
		if st, _ := observed(t, s, "f00a1", "state"); st != "stopped" {
			return "f00a1 state " + st
		}
		return ""
	})
	waitFor(t, 10*time.Second, volume("node-1", "detached"))
	put(t, s, facts.InstanceService("f00b2"), "db", facts.Placement("f00b2"), "node-1", facts.NodePlacement("node-1", "f00b2"), "db")
	waitFor(t, 60*time.Second, running("f00b2"))
	waitFor(t, 10*time.Second, volume("node-1", "attached"))
	second, err := get("/me")
	if err != nil {
		t.Fatal(err)
	}
	log2, err := get("/log")
	if err != nil {
		t.Fatal(err)
	}
	if second == first || log2 != first+"\n"+second+"\n" {
		t.Errorf("the replacement (%s) reads %q from the volume, want the first instance's %s then its own line", second, log2, first)
	}

	// Not persistent: the data goes with the last instance.
	put(t, s, facts.VolumePersistent("data"), false)
	if _, err := s.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement("f00b2")), facts.Delete(facts.NodePlacement("node-1", "f00b2"))}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, volume("node-1", "detached"))
	if _, err := os.Stat(filepath.Join(stateDir, "volumes", "data")); !os.IsNotExist(err) {
		t.Errorf("the data of a volume that is not persistent is still there after its last instance stopped (%v)", err)
	}
}
