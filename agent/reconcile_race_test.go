package agent

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// raceRuntime lets a test finish a start while the node lists: its second
// List (the first led to the start) takes what runs while the start is
// under way, then lets the start finish and waits until the node has seen
// it finish before returning the list taken: the order a slow List and a
// fast start can have for real.
type raceRuntime struct {
	node    *node
	release chan struct{} // closed to let the start under way return

	mu     sync.Mutex // guards the fields below
	ctrs   map[string]Status
	starts int
	lists  int
	raced  bool // the second list was taken before the start finished
}

var _ Runtime = (*raceRuntime)(nil)

func (r *raceRuntime) Start(_ context.Context, sp Spec) (Status, error) {
	r.mu.Lock()
	r.starts++
	if _, ok := r.ctrs[sp.ID]; ok {
		r.mu.Unlock()
		return Status{}, errAlreadyThere(sp.ID)
	}
	first := r.starts == 1
	r.mu.Unlock()
	if first {
		<-r.release
	}
	st := Status{Spec: sp, Running: true, StartedAt: time.Now().UTC(), Health: Healthy}
	r.mu.Lock()
	r.ctrs[sp.ID] = st
	r.mu.Unlock()
	return st, nil
}

type errAlreadyThere string

func (e errAlreadyThere) Error() string { return "instance " + string(e) + " already has a container" }

func (r *raceRuntime) Stop(_ context.Context, id string, _ time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.ctrs, id)
	return nil
}

func (r *raceRuntime) List(context.Context) ([]Status, error) {
	r.mu.Lock()
	r.lists++
	race := r.lists == 2
	r.mu.Unlock()
	if race { // until the start the first list led to is under way
		for r.startsSoFar() == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	r.mu.Lock()
	var out []Status
	for _, st := range r.ctrs {
		out = append(out, st)
	}
	r.raced = r.raced || (race && len(out) == 0)
	r.mu.Unlock()
	if race {
		close(r.release)
		for { // until the node has taken the start for finished
			r.node.mu.Lock()
			busy := len(r.node.starting) > 0
			r.node.mu.Unlock()
			if !busy {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out, nil
}

func (r *raceRuntime) startsSoFar() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts
}

// A start that finishes while the node lists its containers is not seen in
// that list: the node must neither start the instance again (the runtime
// refuses: "already has a container") nor report it failed.
func TestStartFinishingDuringListIsNotAFailure(t *testing.T) {
	store := etcdtest.Start(t).Store(t)
	writeRaw(t, store, facts.ServiceAttr("web", "image"), `"nginx"`,
		facts.Placement("a8f31"), `"node-1"`, facts.NodePlacement("node-1", "a8f31"), `"web"`, facts.InstanceService("a8f31"), `"web"`)
	a := &Agent{cfg: Config{Store: store, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Grace: time.Second},
		feed: NewFeed(store, nil)}
	rt := &raceRuntime{release: make(chan struct{}), ctrs: map[string]Status{}}
	n := newNode(a, NodeConfig{ID: "node-1", CPU: 1, Memory: 1 << 30, Architecture: "amd64", Zone: "z1", Runtime: rt})
	rt.node = n
	runFeed(t, a.feed)
	eventually(t, func() string {
		if w := a.feed.desiredOne("node-1", "a8f31"); !w.Ready {
			return "a8f31 is not ready to start on node-1"
		}
		return ""
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	idle := func() { // until no start is under way: they run on their own goroutines
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
			n.mu.Lock()
			busy := len(n.starting) > 0
			n.mu.Unlock()
			if !busy {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("a start is still under way after 30s")
			}
		}
	}
	n.reconcile(ctx) // starts a8f31; the start waits for the next List
	n.reconcile(ctx) // lists while the start finishes
	idle()
	n.reconcile(ctx) // sees it run
	idle()

	n.mu.Lock()
	defer n.mu.Unlock()
	if f := n.failed["a8f31"]; f != nil {
		t.Errorf("a8f31 is reported failed: %s", f.reason)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.raced {
		t.Fatal("the list never ran while the start was under way: the test proves nothing")
	}
	if rt.starts != 1 {
		t.Errorf("a8f31 was started %d times, want once", rt.starts)
	}
	if st, ok := n.actual["a8f31"]; !ok || !st.Running {
		t.Errorf("a8f31 is not seen running: %+v", n.actual)
	}
}
