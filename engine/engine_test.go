package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// A firing's record carries everything `why` needs and commits at the very
// revision of the writes it explains.
func TestFiringRecordInSameRevisionAsWrites(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	dRev := v.put(t, facts.ServiceInstances("web"), "3")
	e := v.engine(t, &copyEval{version: "v1"}, testConfig())
	v.run(t, e)
	eff := v.waitValue(t, facts.EffectiveInstances("web"), "3")

	evs := v.events(t)
	if len(evs) != 1 {
		t.Fatalf("want 1 firing record, have %d: %+v", len(evs), evs)
	}
	r := evs[0]
	if r.Rev != eff.ModRevision {
		t.Errorf("record at revision %d, write at %d: want the same transaction", r.Rev, eff.ModRevision)
	}
	if err := facts.CheckSegment("event-id", strings.TrimPrefix(r.Key, "event/")); err != nil {
		t.Errorf("record key: %v", err)
	}
	want := facts.EventRecord{Rule: "copy", Version: "v1", Kind: "derive", Bindings: map[string]string{"name": "web"},
		Reads:  []facts.EventRead{{Key: facts.ServiceInstances("web"), Rev: dRev}, {Key: facts.EffectiveInstances("web"), Rev: 0}},
		Writes: []facts.EventWrite{{Key: facts.EffectiveInstances("web"), Value: facts.RawJSON("3")}},
		Leader: "engine-a"}
	got := r.EventRecord
	if _, err := time.Parse(time.RFC3339Nano, got.Time); err != nil {
		t.Errorf("time %q: %v", got.Time, err)
	}
	got.Time = ""
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("record:\n have %s\n want %s", gj, wj)
	}
	waitFor(t, "the commit counted", 5*time.Second, func() bool { return e.Stats().Txns == 1 }) // counted after etcd answers
	st := e.Stats()
	if st.FiringsByRule["copy"] != 1 || st.Txns != 1 || !st.Leading || st.FullRounds < 1 {
		t.Errorf("stats: %+v", st)
	}
}

// The engine's own writes come back through the mirror; they must not make
// it write again.
func TestOwnWritesDoNotLoop(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine(t, &copyEval{version: "v1"}, testConfig())
	v.run(t, e)
	for i := 1; i <= 5; i++ {
		v.put(t, facts.ServiceInstances("web"), strconv.Itoa(i))
		v.waitValue(t, facts.EffectiveInstances("web"), strconv.Itoa(i))
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(v.events(t)); n != 5 {
		t.Errorf("want 5 firing records (one per change), have %d", n)
	}
	if st := e.Stats(); st.Txns != 5 {
		t.Errorf("want 5 transactions, have %d", st.Txns)
	}
}

// A write by someone else between evaluation and commit fails the compare;
// the engine evaluates again on the newer state and never writes the stale value.
func TestConcurrentWriteIsReevaluated(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.put(t, facts.ServiceInstances("web"), "3")
	ev := &copyEval{version: "v1"}
	var once sync.Once
	ev.setHook(func(p *eval.Plan) {
		if len(p.Firings) == 0 {
			return
		}
		once.Do(func() { v.put(t, facts.ServiceInstances("web"), "5") }) // lands after the read, before the commit
	})
	e := v.engine(t, ev, testConfig())
	v.run(t, e)
	v.waitValue(t, facts.EffectiveInstances("web"), "5")
	time.Sleep(200 * time.Millisecond)

	st := e.Stats()
	if st.Conflicts < 1 || st.Reevaluated < 1 {
		t.Errorf("want a conflict and a re-evaluation, stats %+v", st)
	}
	evs := v.events(t)
	if len(evs) != 1 || string(evs[0].Writes[0].Value) != "5" {
		t.Fatalf("want exactly one record, writing 5; have %+v", evs)
	}
	if f := v.waitValue(t, facts.EffectiveInstances("web"), "5"); f.ModRevision != evs[0].Rev {
		t.Errorf("effective written at %d, record at %d", f.ModRevision, evs[0].Rev)
	}
}

// spawnEval creates one instance of service web under a fresh id, taken from
// ids in order: the first that is absent. A firing reads its id's key as
// absent (Rev 0), so a concurrent creation of the same id fails it.
type spawnEval struct {
	ids  []string
	hook func()
	mu   sync.Mutex
}

func (s *spawnEval) Version() string                                        { return "spawn-v1" }
func (s *spawnEval) Full(r facts.Reader) eval.Plan                          { return s.plan(r) }
func (s *spawnEval) Incremental(r facts.Reader, _ []facts.Change) eval.Plan { return s.plan(r) }
func (s *spawnEval) Continue(_ int64, r facts.Reader, _ []facts.Change, _ bool) eval.Plan {
	return s.plan(r)
}
func (s *spawnEval) Uncommitted()         {}
func (s *spawnEval) TimedRules() []string { return nil }

func (s *spawnEval) plan(r facts.Reader) eval.Plan {
	p := eval.Plan{RuleSetVersion: "spawn-v1", Rev: r.Rev()}
	have := 0
	r.Prefix("observed/instance/", func(f facts.Fact) bool {
		if strings.HasSuffix(f.Key, "/service") && string(f.Value) == `"web"` {
			have++
		}
		return true
	})
	if have > 0 {
		return p
	}
	for _, id := range s.ids {
		k := facts.InstanceService(id)
		if _, taken := r.Get(k); taken {
			continue
		}
		p.Firings = append(p.Firings, eval.Firing{Rule: "spawn", Kind: "emit", Bindings: map[string]string{"id": id},
			Reads: []eval.Read{{Key: k, Rev: 0}}, Writes: []eval.Write{{Key: k, Value: []byte(`"web"`)}}})
		break
	}
	s.mu.Lock()
	h := s.hook
	s.hook = nil
	s.mu.Unlock()
	if h != nil {
		h()
	}
	return p
}

// A fresh id created concurrently by someone else is not overwritten: the
// firing is evaluated again and takes the next free id.
func TestFreshIDCollisionRetried(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ev := &spawnEval{ids: []string{"aaaa1", "aaaa2", "aaaa3"}}
	ev.hook = func() { v.put(t, facts.InstanceService("aaaa1"), `"other"`) }
	e := v.engine(t, ev, testConfig())
	v.run(t, e)
	v.waitValue(t, facts.InstanceService("aaaa2"), `"web"`)
	if f, _ := v.get(t, facts.InstanceService("aaaa1")); string(f.Value) != `"other"` {
		t.Errorf("aaaa1 overwritten: %s", f.Value)
	}
	if _, ok := v.get(t, facts.InstanceService("aaaa3")); ok {
		t.Errorf("aaaa3 created too: a fresh id was written twice")
	}
	if st := e.Stats(); st.Conflicts != 1 {
		t.Errorf("want 1 conflict, have %d", st.Conflicts)
	}
}

// Swap replaces the rule set between rounds and evaluates everything with it.
func TestSwapEvaluatesEverythingWithTheNewSet(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.put(t, facts.ServiceInstances("web"), "3")
	e := v.engine(t, &copyEval{version: "v1"}, testConfig())
	v.run(t, e)
	v.waitValue(t, facts.EffectiveInstances("web"), "3")

	v2 := &copyEval{version: "v2", scale: 2}
	e.Swap(v2)
	v.waitValue(t, facts.EffectiveInstances("web"), "6")
	evs := v.events(t)
	if last := evs[len(evs)-1]; last.Version != "v2" {
		t.Errorf("last record from version %q, want v2", last.Version)
	}
	v2.mu.Lock()
	calls := append([]string(nil), v2.calls...)
	v2.mu.Unlock()
	if len(calls) == 0 || calls[0] != "full" {
		t.Errorf("new set's first evaluation: %v, want full", calls)
	}
	if st := e.Stats(); st.RuleSetVersion != "v2" || st.FullRounds < 2 {
		t.Errorf("stats after swap: version %q, full rounds %d", st.RuleSetVersion, st.FullRounds)
	}
}

func TestEventIDs(t *testing.T) {
	g := facts.NewEventIDs()
	g.Seed("29991231T235959.999999999Z-000001")
	prev := ""
	for i := 0; i < 1000; i++ {
		id, at := g.Next()
		if err := facts.CheckSegment("event-id", id); err != nil {
			t.Fatal(err)
		}
		if id <= prev {
			t.Fatalf("id %s after %s: want strictly increasing", id, prev)
		}
		if got, ok := facts.EventTime(id); !ok || !got.Equal(at) {
			t.Fatalf("EventTime(%s) = %v %v, want %v", id, got, ok, at)
		}
		prev = id
	}
	if !strings.HasPrefix(prev, "29991231T235959.999999999Z") && !strings.HasPrefix(prev, "30000101") {
		t.Errorf("seeding did not move the clock forward: %s", prev)
	}
}

func TestMerge(t *testing.T) {
	// Each change's Prev is the revision before it, so the merged change
	// shows whether it kept the first change's Prev.
	ch := func(k string, rev int64) facts.Change {
		return facts.Change{Fact: facts.Fact{Key: k, ModRevision: rev}, Prev: []byte(fmt.Sprint(rev - 1)), PrevKnown: true}
	}
	tests := []struct {
		name string
		in   []facts.Batch
		want string
	}{
		{"one batch", []facts.Batch{{Changes: []facts.Change{ch("a", 1), ch("b", 2)}}}, "a@1<0 b@2<1"},
		{"repeated key keeps the latest, and the first's prev", []facts.Batch{{Changes: []facts.Change{ch("a", 1), ch("b", 2)}}, {Changes: []facts.Change{ch("a", 3)}}}, "b@2<1 a@3<0"},
		{"repeat inside one batch", []facts.Batch{{Changes: []facts.Change{ch("a", 1), ch("a", 2)}}}, "a@2<0"},
		{"empty", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var parts []string
			for _, c := range merge(tc.in) {
				parts = append(parts, fmt.Sprintf("%s@%d<%s", c.Key, c.ModRevision, c.Prev))
			}
			if got := strings.Join(parts, " "); got != tc.want {
				t.Errorf("merge = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"defaults", func(c *Config) {}, ""},
		{"ops", func(c *Config) { c.MaxTxnOps = 1 }, "MaxTxnOps"},
		{"bytes", func(c *Config) { c.MaxTxnBytes = 10 }, "MaxTxnBytes"},
		{"identity", func(c *Config) { c.Identity = "" }, "Identity"},
		{"ttl", func(c *Config) { c.SessionTTL = time.Millisecond }, "SessionTTL"},
		{"retry", func(c *Config) { c.RetryLimit = 0 }, "RetryLimit"},
		{"backoff", func(c *Config) { c.BackoffMax = 0 }, "backoff"},
		{"retention", func(c *Config) { c.EventMaxCount = -1 }, "retention"},
		{"prune", func(c *Config) { c.PruneInterval = 0 }, "PruneInterval"},
		{"resync", func(c *Config) { c.ResyncInterval = -time.Second }, "ResyncInterval"},
		{"no resync", func(c *Config) { c.ResyncInterval = 0 }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewConfig()
			tc.mod(&c)
			err := c.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestLeaderPrefixOutsideRoot(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	cfg := testConfig()
	cfg.LeaderPrefix = v.store.Root + "leader/"
	if _, err := New(v.store, v.mirror, &copyEval{}, cfg); err == nil || !strings.Contains(err.Error(), "LeaderPrefix") {
		t.Errorf("New with a leader prefix under the root: %v, want an error naming LeaderPrefix", err)
	}
	e := v.engine(t, &copyEval{}, testConfig())
	if e.cfg.LeaderPrefix != "/ccattler-leader/" {
		t.Errorf("default leader prefix %q", e.cfg.LeaderPrefix)
	}
}
