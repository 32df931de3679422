package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

func compactPut(t *testing.T, s *facts.Store, value string) int64 {
	t.Helper()
	rev, err := s.Commit(context.Background(), facts.Txn{Ops: []facts.Op{facts.Put(facts.ServiceImage("web"), []byte(value))}})
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func compactRev(t *testing.T, s *facts.Store) int64 {
	t.Helper()
	rev, err := s.CompactRevision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// Each step compacts to the revision the step before read, never to the
// present: what was written since the last step stays readable. A step
// with nothing new since the last compaction compacts nothing, and one
// whose revision etcd compacted past already is no failure.
func TestCompactorStepKeepsTheIntervalBefore(t *testing.T) {
	v := newEnv(t)
	s, ctx := v.store, context.Background()
	c := NewCompactor(s, time.Hour, nil)

	r0 := compactPut(t, s, `"nginx:1.27"`)
	next, ok := c.step(ctx, 0, nil)
	if !ok || next != r0 || compactRev(t, s) != 1 {
		t.Fatalf("first step: next %d (want %d), ok %v, compact revision %d (want 1: nothing recorded before)", next, r0, ok, compactRev(t, s))
	}
	r1 := compactPut(t, s, `"nginx:1.28"`)
	r2 := compactPut(t, s, `"nginx:1.29"`)
	next, ok = c.step(ctx, next, nil)
	if !ok || next != r2 {
		t.Fatalf("second step: next %d, ok %v; want %d, true", next, ok, r2)
	}
	if got := compactRev(t, s); got != r0 {
		t.Errorf("compact revision after the second step = %d, want %d (the first step's)", got, r0)
	}
	if f, ok, err := s.GetAt(ctx, facts.ServiceImage("web"), r1); err != nil || !ok || string(f.Value) != `"nginx:1.28"` {
		t.Errorf("the interval's history at %d: %s, %v, %v; want it readable", r1, f.Value, ok, err)
	}
	if st := c.Stats(); st.Compactions != 1 || st.Revision != r0 || st.Failures != 0 || st.Time <= 0 {
		t.Errorf("stats after one compaction: %+v", st)
	}

	// Nothing written since: the third step compacts to r2, the fourth
	// finds nothing new.
	next, _ = c.step(ctx, next, nil)
	c.step(ctx, next, nil)
	if st := c.Stats(); st.Compactions != 2 || st.Revision != r2 {
		t.Errorf("stats after two idle steps: %+v, want 2 compactions, the last at %d", st, r2)
	}

	// Someone else compacted further: no failure.
	r3 := compactPut(t, s, `"nginx:1.30"`)
	r4 := compactPut(t, s, `"nginx:1.31"`)
	if err := etcdtest.Compact(ctx, s, r4); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.step(ctx, r3, nil); !ok {
		t.Error("a step after an outside compaction stopped")
	}
	if st := c.Stats(); st.Failures != 0 || st.Compactions != 2 {
		t.Errorf("stats after an outside compaction: %+v, want no failure and no compaction counted", st)
	}
}

// A term whose guard fails compacts nothing and stops: a deposed leader
// does not compact.
func TestCompactorStopsWhenTheTermIsOver(t *testing.T) {
	v := newEnv(t)
	s, ctx := v.store, context.Background()
	c := NewCompactor(s, time.Hour, nil)
	r0 := compactPut(t, s, `"nginx:1.28"`)
	compactPut(t, s, `"nginx:1.29"`)
	gone := []facts.Guard{facts.CreatedAt("/ccattler-leader/gone", 12345)}
	if _, ok := c.step(ctx, r0, gone); ok {
		t.Error("a step under a failed guard goes on")
	}
	if got := compactRev(t, s); got != 1 {
		t.Errorf("compact revision after a failed guard = %d, want 1", got)
	}
}

// Run compacts every interval while its context lasts and returns when it
// ends; the compact revision etcd reports is the compactor's last.
func TestCompactorRunsEveryInterval(t *testing.T) {
	v := newEnv(t)
	s := v.store
	c := NewCompactor(s, 50*time.Millisecond, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, nil) }()
	deadline := time.Now().Add(30 * time.Second)
	for c.Stats().Compactions < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("not 3 compactions within 30s: %+v", c.Stats())
		}
		compactPut(t, s, `"nginx:1.28"`)
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context's end")
	}
	if got, want := compactRev(t, s), c.Stats().Revision; got != want {
		t.Errorf("etcd's compact revision %d, the compactor's last %d", got, want)
	}
	if err := s.Compact(context.Background(), c.Stats().Revision); !errors.Is(err, facts.ErrCompacted) {
		t.Errorf("compacting again to the last revision: %v, want ErrCompacted", err)
	}
}

// etcd out of space (its backend over the quota, the NOSPACE alarm) takes
// no puts, the engine's and agents' included. The compactor's interval
// compacts, waiting for etcd to delete the old versions, then
// defragments and disarms: writes go on, and the recovery is counted.
func TestCompactorRecoversFromNoSpace(t *testing.T) {
	e := etcdtest.Start(t)
	e.Etcd.Close()
	e.Cfg.QuotaBackend = 16 << 20
	e.Restart(t)
	s, ctx := e.Store(t), context.Background()
	c := NewCompactor(s, time.Hour, nil)

	big := `"` + strings.Repeat("x", 256<<10) + `"`
	var last int64
	var err error
	for i := 0; i < 1000; i++ {
		var rev int64
		rev, err = etcdtest.PutRaw(ctx, s, fmt.Sprintf("observed/blob/%d", i%8), big)
		if err != nil {
			break
		}
		last = rev
	}
	if !errors.Is(err, facts.ErrNoSpace) {
		t.Fatalf("after filling the backend: %v, want ErrNoSpace", err)
	}
	if _, ok := c.step(ctx, last, nil); !ok {
		t.Fatal("step stopped")
	}
	c.recoverSpace(ctx)
	if st := c.Stats(); st.SpaceRecoveries != 1 || st.Compactions != 1 {
		t.Errorf("stats %+v, want one compaction and one recovery", st)
	}
	if _, err := etcdtest.PutRaw(ctx, s, "observed/blob/0", `"small"`); err != nil {
		t.Fatalf("a put after the compactor's interval: %v", err)
	}
	c.recoverSpace(ctx) // no alarm: nothing to do
	if st := c.Stats(); st.SpaceRecoveries != 1 {
		t.Errorf("recoveries %d after an interval without an alarm, want 1", st.SpaceRecoveries)
	}
}
