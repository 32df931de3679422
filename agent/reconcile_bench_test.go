package agent

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// listedRuntime is a fake runtime whose containers all run, as started:
// List returns a fresh copy each time, as a runtime does.
type listedRuntime struct{ ctrs []Status }

func (r *listedRuntime) Start(context.Context, Spec) (Status, error) {
	return Status{}, fmt.Errorf("listedRuntime starts nothing")
}
func (r *listedRuntime) Stop(context.Context, string, time.Duration) error { return nil }
func (r *listedRuntime) List(context.Context) ([]Status, error) {
	return append([]Status(nil), r.ctrs...), nil
}

// BenchmarkReconcile is one reconcile of a node whose instances all run as
// placed, at 1,000 and 30,000 instances: a list of the runtime compared
// with the feed's placements, nothing to start or stop; and, reported as
// ms/poked-reconcile, one after a poke, which builds the node's wants from
// the feed's mirror again, as a change of its placements does. A simulated
// node of the 100,000-instance scale-down on 3 nodes does this about four
// times a second, so what it allocates is a large part of the collector's
// work there.
func BenchmarkReconcile(b *testing.B) {
	store := etcdtest.Start(b).Store(b)
	writeRaw(b, store, facts.ServiceAttr("web", "image"), `"nginx:1.28"`, facts.ServiceCPU("web"), `0.1`)
	for k, size := range []int{1000, 30000} {
		b.Run(fmt.Sprintf("instances=%d", size), func(b *testing.B) {
			node := fmt.Sprintf("node-%d", size)
			rt := &listedRuntime{}
			var kv []string
			for i := range size {
				id := fmt.Sprintf("%c%05x", 'a'+k, i) // each size's own instances
				kv = append(kv, facts.Placement(id), `"`+node+`"`, facts.NodePlacement(node, id), `"web"`, facts.InstanceService(id), `"web"`)
				if len(kv) >= 1000 || i == size-1 {
					writeRaw(b, store, kv...)
					kv = kv[:0]
				}
			}
			a := &Agent{cfg: Config{Store: store, Log: slog.New(slog.DiscardHandler), Grace: time.Second},
				feed: NewFeed(store, nil)}
			n := newNode(a, NodeConfig{ID: node, CPU: 64, Memory: 1 << 40, Architecture: "amd64", Zone: "z1", Runtime: rt})
			a.feed.Subscribe(node)
			runFeed(b, a.feed)
			var wants map[string]*Want
			eventually(b, func() string {
				wants, _ = a.feed.Desired(node)
				ready := 0
				for _, w := range wants {
					if w.Ready {
						ready++
					}
				}
				if ready != size {
					return fmt.Sprintf("%d of %d placements ready", ready, size)
				}
				return ""
			})
			for _, w := range wants {
				rt.ctrs = append(rt.ctrs, Status{Spec: w.Spec, Image: "docker.io/library/nginx:1.28",
					IP: "10.88.0.2", Running: true, StartedAt: time.Now().UTC(), Health: Healthy})
			}
			ctx := context.Background()
			n.reconcile(ctx)
			b.ReportAllocs()
			var rebuilt time.Duration // reconciles after a poke, the feed's wants built again
			const rebuilds = 20
			for range rebuilds {
				a.feed.mu.Lock()
				a.feed.pokeLocked(node)
				a.feed.mu.Unlock()
				start := time.Now()
				n.reconcile(ctx)
				rebuilt += time.Since(start)
			}
			b.ResetTimer()
			for range b.N {
				n.reconcile(ctx)
			}
			b.StopTimer()
			b.ReportMetric(float64(rebuilt.Nanoseconds())/rebuilds/1e6, "ms/poked-reconcile")
			n.mu.Lock()
			defer n.mu.Unlock()
			if len(n.actual) != size || len(n.starting)+len(n.stopping)+len(n.failed) != 0 {
				b.Fatalf("after reconciling: %d seen, %d starting, %d stopping, %d failed; want %d seen and nothing else",
					len(n.actual), len(n.starting), len(n.stopping), len(n.failed), size)
			}
		})
	}
}
