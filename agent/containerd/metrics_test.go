package containerd_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/containerd"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestUsageFromCgroup measures a real container's cpu use from its cgroup:
// idle it uses next to nothing; answering requests as fast as the test can
// send them, it uses a measurable share of a core.
func TestUsageFromCgroup(t *testing.T) {
	d := startDaemon(t)
	imgDir := t.TempDir()
	writeImage(t, filepath.Join(imgDir, "healthz.tar"), "ccattler.test/healthz:1", buildServer(t))
	ctx := context.Background()
	rcfg := containerd.NewConfig()
	rcfg.Address, rcfg.Namespace, rcfg.Address4, rcfg.ImageDir = d.sock, d.namespace, "127.0.0.1", imgDir
	rcfg.Log = slog.New(slog.DiscardHandler)
	if sn := os.Getenv("CCATTLER_SNAPSHOTTER"); sn != "" {
		rcfg.Snapshotter = sn
	}
	rt, err := containerd.New(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	port := etcdtest.FreePort(t)
	const id = "bu5e1"
	if _, err := rt.Start(ctx, agent.Spec{ID: id, Service: "hz", Image: "ccattler.test/healthz:1", Ports: []int{port}}); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx, id, time.Second)
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	waitFor(t, 30*time.Second, func() string {
		if err := httpOK(url); err != nil {
			return err.Error()
		}
		return ""
	})

	measure := func(busy bool) agent.Usage {
		t.Helper()
		if _, err := rt.Usage(ctx); err != nil { // the first reading
			t.Fatal(err)
		}
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			if busy {
				_ = httpOK(url)
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
		us, err := rt.Usage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(us) != 1 || us[0].ID != id || us[0].Service != "hz" {
			t.Fatalf("usage %+v, want one entry for %s of hz", us, id)
		}
		return us[0]
	}
	idle, busy := measure(false), measure(true)
	t.Logf("idle %.4f cores, busy %.4f cores", idle.CPU, busy.CPU)
	if idle.CPU < 0 || idle.CPU > 0.05 {
		t.Errorf("idle container uses %.4f cores, want about 0", idle.CPU)
	}
	if busy.CPU < 0.01 || busy.CPU <= idle.CPU {
		t.Errorf("busy container uses %.4f cores (idle %.4f), want a measurable share of a core", busy.CPU, idle.CPU)
	}
}
