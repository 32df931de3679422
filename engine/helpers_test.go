package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// env is one real embedded etcd with a store and a running mirror.
type env struct {
	etcd   *etcdtest.Etcd
	store  *facts.Store
	mirror *facts.Mirror
	ctx    context.Context
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := etcdtest.Start(t)
	return envOn(t, e)
}

// envOn gives a second store and mirror (its own client) on the same etcd.
func envOn(t testing.TB, e *etcdtest.Etcd) *env {
	t.Helper()
	return envOnSchema(t, e, nil)
}

// envOnSchema is envOn with a store (and so a mirror) of the given schema
// (nil: the store's own), as the server's is of its rule set's: the
// evaluator of a rule set finds facts by their types.
func envOnSchema(t testing.TB, e *etcdtest.Etcd, schema *facts.Schema) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	store := e.Store(t)
	if schema != nil {
		store.Schema = schema
	}
	m := facts.NewMirror(store, nil)
	if err := m.Sync(ctx); err != nil {
		t.Fatalf("sync mirror: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{etcd: e, store: store, mirror: m, ctx: ctx}
}

func testConfig() Config {
	c := NewConfig()
	c.Identity = "engine-a"
	c.SessionTTL = time.Second
	c.BackoffMin = 10 * time.Millisecond
	c.BackoffMax = 200 * time.Millisecond
	c.PruneInterval = time.Hour
	return c
}

func (v *env) engine(t testing.TB, ev Evaluator, cfg Config) *Engine {
	t.Helper()
	e, err := New(v.store, v.mirror, ev, cfg)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	return e
}

// run runs the engine until the test ends.
func (v *env) run(t testing.TB, e *Engine) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(v.ctx)
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func (v *env) put(t testing.TB, key, raw string) int64 {
	t.Helper()
	rev, err := v.store.Commit(v.ctx, facts.Txn{Ops: []facts.Op{facts.Put(key, []byte(raw))}})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return rev
}

func (v *env) get(t testing.TB, key string) (facts.Fact, bool) {
	t.Helper()
	f, ok, err := v.store.Get(v.ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return f, ok
}

// waitValue waits until key holds raw in etcd.
func (v *env) waitValue(t testing.TB, key, raw string) facts.Fact {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, ok := v.get(t, key)
		if ok && string(f.Value) == raw {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %s, have %q (present %v)", key, raw, f.Value, ok)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type event struct {
	Key string
	Rev int64
	facts.EventRecord
}

// events returns every firing record in etcd, oldest first.
func (v *env) events(t testing.TB) []event {
	t.Helper()
	fs, _, err := v.store.List(v.ctx, "event/", 0)
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []event
	for _, f := range fs {
		e := event{Key: f.Key, Rev: f.ModRevision}
		if err := json.Unmarshal(f.Value, &e.EventRecord); err != nil {
			t.Fatalf("%s: %v", f.Key, err)
		}
		out = append(out, e)
	}
	return out
}

// copyEval is a tiny evaluator for the engine's tests: rule "copy" derives
// effective/service/{name}/instances from desired/service/{name}/instances,
// and deletes it when the desired count is gone. hook, if set, runs after
// each evaluation with the plan, while the evaluator holds the mirror's view.
type copyEval struct {
	version string
	scale   int        // if > 1, the derived count is the desired one times scale
	mu      sync.Mutex // guards hook and calls
	hook    func(p *eval.Plan)
	calls   []string // "full" or the changed keys of an incremental call
}

func (c *copyEval) Version() string { return c.version }

func (c *copyEval) Full(r facts.Reader) eval.Plan {
	names := map[string]bool{}
	for _, pfx := range []string{"desired/service/", "effective/service/"} {
		r.Prefix(pfx, func(f facts.Fact) bool {
			if n, ok := copyName(f.Key); ok {
				names[n] = true
			}
			return true
		})
	}
	c.note("full")
	return c.plan(r, names)
}

func (c *copyEval) Incremental(r facts.Reader, changes []facts.Change) eval.Plan {
	names := map[string]bool{}
	var keys []string
	for _, ch := range changes {
		keys = append(keys, ch.Key)
		if n, ok := copyName(ch.Key); ok {
			names[n] = true
		}
	}
	c.note(strings.Join(keys, ","))
	return c.plan(r, names)
}

// Continue keeps nothing between calls: it is Incremental.
func (c *copyEval) Continue(_ int64, r facts.Reader, changes []facts.Change, _ bool) eval.Plan {
	return c.Incremental(r, changes)
}

func (c *copyEval) Uncommitted()         {}
func (c *copyEval) TimedRules() []string { return nil }

func (c *copyEval) note(s string) {
	c.mu.Lock()
	c.calls = append(c.calls, s)
	c.mu.Unlock()
}

func copyName(key string) (string, bool) {
	parts := strings.Split(key, "/")
	if len(parts) == 4 && parts[1] == "service" && parts[3] == "instances" && (parts[0] == "desired" || parts[0] == "effective") {
		return parts[2], true
	}
	return "", false
}

func (c *copyEval) plan(r facts.Reader, names map[string]bool) eval.Plan {
	p := eval.Plan{RuleSetVersion: c.version, Rev: r.Rev()}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		dk, ek := facts.ServiceInstances(n), facts.EffectiveInstances(n)
		d, dok := r.Get(dk)
		e, eok := r.Get(ek)
		f := eval.Firing{Rule: "copy", Kind: "derive", Bindings: map[string]string{"name": n},
			Reads: []eval.Read{{Key: dk, Rev: d.ModRevision}, {Key: ek, Rev: e.ModRevision}}}
		want := d.Value
		if n, err := strconv.Atoi(string(d.Value)); err == nil && c.scale > 1 {
			want = []byte(strconv.Itoa(n * c.scale))
		}
		switch {
		case dok && (!eok || !bytes.Equal(want, e.Value)):
			f.Writes = []eval.Write{{Key: ek, Value: want}}
		case !dok && eok:
			f.Writes = []eval.Write{{Key: ek}}
		default:
			continue
		}
		p.Firings = append(p.Firings, f)
	}
	c.mu.Lock()
	hook := c.hook
	c.mu.Unlock()
	if hook != nil {
		hook(&p)
	}
	return p
}

func (c *copyEval) setHook(h func(p *eval.Plan)) {
	c.mu.Lock()
	c.hook = h
	c.mu.Unlock()
}
