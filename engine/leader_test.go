package engine

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

func waitFor(t *testing.T, what string, within time.Duration, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// leaderKeys returns the election keys, oldest first.
func leaderKeys(t *testing.T, v *env) []facts.Fact {
	t.Helper()
	keys, _, err := v.store.WithRoot("/ccattler-leader/").List(v.ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].CreateRevision < keys[j].CreateRevision })
	return keys
}

// Two engines: one leads, the other waits. When the leader's session is
// killed, the standby takes over within seconds, and no record of the old
// leader commits after the new one's election.
func TestLeaderFailover(t *testing.T) {
	a := newEnv(t)
	b := envOn(t, a.etcd)
	cfgA, cfgB := testConfig(), testConfig()
	cfgB.Identity = "engine-b"
	ea := a.engine(t, &copyEval{version: "v1"}, cfgA)
	eb := b.engine(t, &copyEval{version: "v1"}, cfgB)
	a.run(t, ea)
	waitFor(t, "engine-a leads", 5*time.Second, func() bool { return ea.Stats().Leading })
	stopB := b.run(t, eb)
	a.put(t, facts.ServiceInstances("one"), "1")
	a.waitValue(t, facts.EffectiveInstances("one"), "1")
	if eb.Stats().Leading {
		t.Fatal("both engines lead")
	}
	for _, e := range []*Engine{ea, eb} {
		if who, err := e.Leader(a.ctx); err != nil || who != "engine-a" {
			t.Errorf("Leader() = %q, %v; want engine-a", who, err)
		}
	}

	// Kill the leader's session as a partition would: its lease is revoked
	// behind its back, while changes keep coming for it to act on.
	keys := leaderKeys(t, a)
	if len(keys) != 2 || string(keys[0].Value) != "engine-a" || string(keys[1].Value) != "engine-b" {
		t.Fatalf("election keys: %v", keys)
	}
	// engine-b's key exists since it began to campaign; it leads from the
	// revision that deletes engine-a's key.
	bRev, err := a.store.RevokeAt(a.ctx, facts.LeaseID(keys[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 6; i++ {
		a.put(t, facts.ServiceInstances("n"+strconv.Itoa(i)), strconv.Itoa(i))
	}
	took := waitFor(t, "engine-b takes over", 5*time.Second, func() bool { return eb.Stats().Leading })
	t.Logf("standby took over %s after the leader's session ended", took)
	if keys := leaderKeys(t, a); len(keys) == 0 || string(keys[0].Value) != "engine-b" {
		t.Fatalf("election keys after the revoke: %v", keys)
	}
	for i := 2; i <= 6; i++ {
		a.waitValue(t, facts.EffectiveInstances("n"+strconv.Itoa(i)), strconv.Itoa(i))
	}
	waitFor(t, "engine-a steps down", 5*time.Second, func() bool { return !ea.Stats().Leading })
	if who, _ := ea.Leader(a.ctx); who != "engine-b" {
		t.Errorf("Leader() after the failover = %q, want engine-b", who)
	}

	byLeader := map[string]int{}
	for _, ev := range a.events(t) {
		byLeader[ev.Leader]++
		switch ev.Leader {
		case "engine-a":
			if ev.Rev >= bRev {
				t.Errorf("engine-a committed %s at %d, after engine-b was elected at %d", ev.Key, ev.Rev, bRev)
			}
		case "engine-b":
			if ev.Rev <= bRev {
				t.Errorf("engine-b committed %s at %d, before its election at %d", ev.Key, ev.Rev, bRev)
			}
		default:
			t.Errorf("record %s from %q", ev.Key, ev.Leader)
		}
	}
	if byLeader["engine-a"] < 1 || byLeader["engine-b"] < 1 {
		t.Errorf("records by leader: %v, want some of each", byLeader)
	}

	// A leader that stops resigns: engine-a, waiting as standby, takes over at once.
	stopB()
	took = waitFor(t, "engine-a takes over after engine-b stops", 3*time.Second, func() bool { return ea.Stats().Leading })
	t.Logf("standby took over %s after the leader stopped", took)
	a.put(t, facts.ServiceInstances("last"), "7")
	a.waitValue(t, facts.EffectiveInstances("last"), "7")
	if st := ea.Stats(); st.Terms != 2 {
		t.Errorf("engine-a terms: %d, want 2", st.Terms)
	}

}

// etcd goes away under a running engine: its session lapses, the term ends,
// and when etcd is back the engine campaigns again, evaluates everything and
// goes on.
func TestEngineSurvivesEtcdRestart(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine(t, &copyEval{version: "v1"}, testConfig())
	v.run(t, e)
	v.put(t, facts.ServiceInstances("before"), "1")
	v.waitValue(t, facts.EffectiveInstances("before"), "1")

	t0 := time.Now()
	v.etcd.Close()
	t.Logf("closed %s", time.Since(t0))
	took := waitFor(t, "the term ends without etcd", 15*time.Second, func() bool { return !e.Stats().Leading })
	t.Logf("term ended %s", took)
	t0 = time.Now()
	v.etcd.Restart(t)
	t.Logf("restarted %s", time.Since(t0))
	took = waitFor(t, "leading again", 20*time.Second, func() bool { return e.Stats().Leading && e.Stats().Terms == 2 })
	t.Logf("leading again %s", took)
	v.put(t, facts.ServiceInstances("after"), "2")
	v.waitValue(t, facts.EffectiveInstances("after"), "2")
	if n := len(v.events(t)); n != 2 {
		t.Errorf("want 2 firing records, have %d", n)
	}
}

// TestWhileLeading: the hook runs on the leader only, with a guard that
// holds while its term lasts and fails once the term is over; the standby
// runs it once it takes over.
func TestWhileLeading(t *testing.T) {
	a := newEnv(t)
	b := envOn(t, a.etcd)
	type run struct {
		guard []facts.Guard
		ended chan struct{}
	}
	hook := func(runs chan<- run) func(ctx context.Context, guard []facts.Guard) {
		return func(ctx context.Context, guard []facts.Guard) {
			r := run{guard: guard, ended: make(chan struct{})}
			runs <- r
			<-ctx.Done()
			close(r.ended)
		}
	}
	runsA, runsB := make(chan run, 4), make(chan run, 4)
	cfgA, cfgB := testConfig(), testConfig()
	cfgB.Identity = "engine-b"
	cfgA.WhileLeading, cfgB.WhileLeading = hook(runsA), hook(runsB)
	ea := a.engine(t, &copyEval{version: "v1"}, cfgA)
	eb := b.engine(t, &copyEval{version: "v1"}, cfgB)
	a.run(t, ea)
	var ra run
	select {
	case ra = <-runsA:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader's hook did not run")
	}
	b.run(t, eb)
	waitFor(t, "engine-b campaigns", 5*time.Second, func() bool { return len(leaderKeys(t, a)) == 2 })
	select {
	case <-runsB:
		t.Fatal("the standby runs the hook too")
	case <-time.After(500 * time.Millisecond):
	}
	put := func(guard []facts.Guard) bool {
		_, err := a.store.Commit(a.ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Clock(), []byte(`"2026-01-01T00:00:00Z"`))}, Guard: guard})
		if err != nil && !errors.Is(err, facts.ErrConflict) {
			t.Fatal(err)
		}
		return err == nil
	}
	if len(ra.guard) == 0 || !put(ra.guard) {
		t.Fatal("the leader's guard does not hold during its term")
	}
	keys := leaderKeys(t, a)
	if err := a.store.Revoke(a.ctx, facts.LeaseID(keys[0].Lease)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ra.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the deposed leader's hook was not stopped")
	}
	if put(ra.guard) {
		t.Error("the deposed leader's guard still holds")
	}
	select {
	case rb := <-runsB:
		if !put(rb.guard) {
			t.Error("the new leader's guard does not hold")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new leader's hook did not run")
	}
}
