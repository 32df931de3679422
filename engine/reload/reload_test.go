package reload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/rules"
)

const spread = `rule "schedule" {
  doc       = "Place a pending instance on the alive node with the fewest instances."
  principal = "scheduler"
  match {
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match {
      nstate = "observed/node/{node}/state"
    }
    aggregate "placed" {
      match {
        node = "placement/instance/{other}"
      }
      count = true
    }
    filters {
      alive = "nstate == 'alive'"
    }
    score = "-double(placed)"
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`

// installs records the versions handed to the engine.
type installs struct {
	mu sync.Mutex
	v  []string
}

func (in *installs) install(rs *rules.RuleSet) {
	in.mu.Lock()
	in.v = append(in.v, rs.Version)
	in.mu.Unlock()
}

func (in *installs) versions() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.v...)
}

func setup(t *testing.T, watch bool) (*facts.Store, string, *reload.Reloader, *installs) {
	t.Helper()
	s := etcdtest.Start(t).Store(t)
	dir := t.TempDir()
	write(t, dir, "scheduler.hcl", spread)
	rs, diags := rules.Load(dir, rules.WithSchema(s.Schema))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	in := &installs{}
	r, err := reload.New(reload.Config{Dir: dir, Store: s, Identity: "server-1", Install: in.install,
		Watch: watch, Poll: 20 * time.Millisecond, StatusTTL: 2 * time.Second}, rs)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir, r, in
}

func write(t *testing.T, dir, name, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

func reloadEvents(t *testing.T, s *facts.Store) []audit.Event {
	t.Helper()
	evs, _, _, err := audit.List(context.Background(), s, audit.Filter{Rule: "reload"})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// One reloader through its three outcomes, in order.
func TestReload(t *testing.T) {
	ctx := context.Background()
	s, dir, r, in := setup(t, false)
	v0 := r.Status().Version
	packed := strings.Replace(spread, `score = "-double(placed)"`, `score = "double(placed)"`, 1)

	steps := []struct {
		name     string
		src      string // scheduler.hcl's new text
		outcome  string
		version  string // running afterwards; "" = v0
		installs int
		records  []string // kinds of the reload records so far
		diag     string
	}{
		{name: "unchanged", src: spread, outcome: reload.Unchanged, installs: 0},
		{name: "changed", src: packed, outcome: reload.Accepted, version: "new", installs: 1, records: []string{"reload"}},
		{name: "type error", src: strings.Replace(packed, `score = "double(placed)"`, `score = "placed + 'x'"`, 1),
			outcome: reload.Rejected, version: "new", installs: 1, records: []string{"reload", "reload-rejected"},
			diag: "scheduler.hcl:22:21: error: CEL type error"},
		{name: "unknown key form", src: strings.Replace(packed, "observed/node/{node}/state", "observed/nodes/{node}/state", 1),
			outcome: reload.Rejected, version: "new", installs: 1, records: []string{"reload", "reload-rejected", "reload-rejected"},
			diag: "scheduler.hcl:11:26: error: Unknown key form"},
	}
	var newVersion string
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			write(t, dir, "scheduler.hcl", st.src)
			res := r.Reload(ctx, "test", "")
			if res.Outcome != st.outcome {
				t.Fatalf("outcome %s, want %s; diagnostics:\n%s", res.Outcome, st.outcome, res.Diagnostics)
			}
			if st.outcome == reload.Accepted {
				newVersion = res.Version
			}
			want := v0
			if st.version == "new" {
				want = newVersion
			}
			if got := r.Status().Version; got != want {
				t.Errorf("running version %s, want %s", got, want)
			}
			if n := len(in.versions()); n != st.installs {
				t.Errorf("%d sets installed, want %d", n, st.installs)
			}
			var kinds []string
			for _, e := range reloadEvents(t, s) {
				kinds = append(kinds, e.Kind)
				if e.Leader != "server-1" || e.Bindings["source"] != dir {
					t.Errorf("record %+v does not name the server and the source", e)
				}
			}
			if strings.Join(kinds, ",") != strings.Join(st.records, ",") {
				t.Errorf("reload records %v, want %v", kinds, st.records)
			}
			if st.diag != "" {
				if !strings.Contains(res.Diagnostics, filepath.Join(dir, st.diag)) {
					t.Errorf("diagnostics lack %s:\n%s", st.diag, res.Diagnostics)
				}
				lr := r.Status().LastRejected
				if lr == nil || lr.Diagnostics != res.Diagnostics || lr.Previous != newVersion || lr.Version == newVersion {
					t.Errorf("status' last rejection %+v", lr)
				}
				evs := reloadEvents(t, s)
				if last := evs[len(evs)-1]; !strings.Contains(last.Message, filepath.Join(dir, st.diag)) {
					t.Errorf("the rejection record's message lacks the diagnostics:\n%s", last.Message)
				}
			}
		})
	}
	if st := r.Status(); st.Reloads != 1 || st.Failures != 2 {
		t.Errorf("status counts %d reloads, %d failures; want 1, 2", st.Reloads, st.Failures)
	}
}

// A request through etcd is answered in the server's status key, which
// disappears when the server stops.
func TestRequestAndStatus(t *testing.T) {
	s, dir, r, in := setup(t, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "the status key", func() bool {
		sts, _, err := reload.ReadStatus(ctx, s, "/ccattler-leader/")
		return err == nil && len(sts) == 1
	})

	askErr := func(want string) (reload.Result, error) {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		defer acancel()
		req, rev, err := reload.Ask(actx, s, "tester@here")
		if err != nil {
			return reload.Result{}, err
		}
		got, asked, err := reload.Answers(actx, s, req.ID, rev)
		if err != nil || len(asked) != 1 || asked[0] != "server-1" {
			return reload.Result{}, fmt.Errorf("answers %v of %v: %v", got, asked, err)
		}
		res := got["server-1"].LastRequest
		if res.Outcome != want || res.Request != req.ID || res.Cause != "request" {
			return *res, fmt.Errorf("answer %+v, want %s to request %s", res, want, req.ID)
		}
		return *res, nil
	}
	ask := func(want string) reload.Result {
		t.Helper()
		res, err := askErr(want)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ask(reload.Unchanged)
	t.Run("requests made together each get their answer", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := askErr(reload.Unchanged); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	})
	write(t, dir, "more.hcl", strings.Replace(spread, `rule "schedule"`, `rule "schedule_too"`, 1))
	res := ask(reload.Rejected) // two rules writing placement/instance/{id} without an order
	if !strings.Contains(res.Diagnostics, "more.hcl:") {
		t.Errorf("diagnostics of the conflicting file:\n%s", res.Diagnostics)
	}
	if err := os.Remove(filepath.Join(dir, "more.hcl")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "scheduler.hcl", strings.Replace(spread, "fewest", "least", 1))
	res = ask(reload.Accepted)
	sts, _, err := reload.ReadStatus(ctx, s, "/ccattler-leader/")
	if err != nil || len(sts) != 1 {
		t.Fatalf("status: %v %v", sts, err)
	}
	if st := sts[0]; st.Version != res.Version || st.Server != "server-1" || st.LastRejected == nil || st.Reloads != 1 ||
		len(in.versions()) != 1 || in.versions()[0] != res.Version {
		t.Errorf("status %+v after accepting %s; installed %v", st, res.Version, in.versions())
	}

	cancel()
	<-done
	sts, _, err = reload.ReadStatus(context.Background(), s, "/ccattler-leader/")
	if err != nil || len(sts) != 0 {
		t.Errorf("a stopped server's status is still there: %+v %v", sts, err)
	}
	raw, ok, err := s.WithRoot(reload.CtlPrefix(s.Root)).Get(context.Background(), "reload")
	if err != nil || !ok {
		t.Fatalf("request key: %v", err)
	}
	var req reload.Request
	if err := json.Unmarshal(raw.Value, &req); err != nil || req.By != "tester@here" {
		t.Errorf("request %s: %v", raw.Value, err)
	}
	if !strings.HasPrefix(reload.RequestKey(s.Root), "/ccattler-ctl/") {
		t.Errorf("request key %s lies under the fact root", reload.RequestKey(s.Root))
	}
}

// --watch: a change is loaded once it holds still; a broken save is
// rejected once, and putting the running files back is "unchanged".
func TestWatch(t *testing.T) {
	s, dir, r, in := setup(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	v0 := r.Status().Version

	write(t, dir, "scheduler.hcl", strings.Replace(spread, "fewest", "least", 1))
	waitFor(t, "the change loaded", func() bool { return r.Status().Version != v0 })
	v1 := r.Status().Version
	write(t, dir, "broken.hcl", "rule \"x\" {\n")
	waitFor(t, "the broken file rejected", func() bool { return r.Status().Failures == 1 })
	time.Sleep(100 * time.Millisecond) // several polls: still one rejection, not one per poll
	if st := r.Status(); st.Failures != 1 || st.Version != v1 || !strings.Contains(st.LastRejected.Diagnostics, "broken.hcl:1:10: error: Unclosed configuration block") {
		t.Errorf("status after a broken save: %+v\n%s", st, st.LastRejected.Diagnostics)
	}
	if err := os.Remove(filepath.Join(dir, "broken.hcl")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := in.versions(); len(got) != 1 || got[0] != v1 {
		t.Errorf("installed %v, want only %s", got, v1)
	}
	if n := len(reloadEvents(t, s)); n != 2 {
		t.Errorf("%d reload records, want 2 (accepted, rejected)", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With no server running, a request is answered by no one at once.
func TestRequestWithoutServers(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, rev, err := reload.Ask(ctx, s, "tester@here")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, asked, err := reload.Answers(ctx, s, req.ID, rev)
	if err != nil || len(got) != 0 || len(asked) != 0 || time.Since(start) > time.Second {
		t.Errorf("answers %v of %v after %s: %v", got, asked, time.Since(start), err)
	}
}

// countHandler counts the log records whose message starts with prefix.
type countHandler struct {
	prefix string
	mu     sync.Mutex
	n      int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
	}
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }
func (h *countHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// TestRequestWatchBacksOff: with etcd out of reach (here: a closed client,
// every call failing at once) the request watch is retried after pauses
// that double, not every 100ms: a few warnings in three seconds, not thirty.
func TestRequestWatchBacksOff(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	dir := t.TempDir()
	write(t, dir, "scheduler.hcl", spread)
	rs, diags := rules.Load(dir, rules.WithSchema(s.Schema))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	h := &countHandler{prefix: "reload: cannot read the request key"}
	r, err := reload.New(reload.Config{Dir: dir, Store: s, Identity: "server-1", Install: func(*rules.RuleSet) {},
		Log: slog.New(h)}, rs)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	r.Run(ctx)
	// 100ms, 200ms, 400ms, 800ms, 1.6s: at most six attempts in 3s.
	if n := h.count(); n < 2 || n > 6 {
		t.Errorf("%d failed attempts to read the request key in 3s: expected a handful, pauses doubling from 100ms", n)
	}
}
