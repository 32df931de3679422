package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// countPlan has n firings of rule "count", each writing w effective counts.
func countPlan(n, w int) eval.Plan {
	p := eval.Plan{RuleSetVersion: "v1"}
	for i := 0; i < n; i++ {
		f := eval.Firing{Rule: "count", Kind: "derive", Bindings: map[string]string{"i": strconv.Itoa(i)}}
		for j := 0; j < w; j++ {
			k := facts.EffectiveInstances(fmt.Sprintf("s%d-%d", i, j))
			f.Reads = append(f.Reads, eval.Read{Key: k, Rev: 0})
			f.Writes = append(f.Writes, eval.Write{Key: k, Value: []byte(strconv.Itoa(i))})
		}
		p.Firings = append(p.Firings, f)
	}
	return p
}

// byRevision groups the firing records by the revision they committed at.
func byRevision(evs []event) map[int64][]event {
	out := map[int64][]event{}
	for _, e := range evs {
		out[e.Rev] = append(out[e.Rev], e)
	}
	return out
}

// A plan larger than the transaction limit commits in several transactions,
// each holding whole firings with their records.
func TestPlanSplitOnFiringBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		firings, w   int
		reads        int // extra reads per firing, of absent keys
		maxOps       int
		wantTxns     int
		wantPerTxnAt int // firings in the first transaction
	}{
		{"fits in one", 5, 3, 0, 128, 1, 5},
		{"two firings per txn", 10, 3, 0, 8, 5, 2}, // 4 ops per firing
		{"one firing per txn", 6, 3, 0, 7, 6, 1},   // 4 ops each, 2 do not fit in 7
		{"compares bind too", 9, 1, 2, 8, 5, 2},    // ops allow 4 firings, compares (3 each, +1 per txn) only 2
		{"uneven last", 7, 2, 0, 9, 3, 3},          // 3 ops each
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t)
			cfg := testConfig()
			cfg.MaxTxnOps = tc.maxOps
			e := v.engine(t, &copyEval{}, cfg)
			p := countPlan(tc.firings, tc.w)
			for i := range p.Firings {
				for j := 0; j < tc.reads; j++ {
					p.Firings[i].Reads = append(p.Firings[i].Reads, eval.Read{Key: facts.ServiceInstances(fmt.Sprintf("r%d-%d", i, j))})
				}
			}
			if err := e.apply(v.ctx, nil, &copyEval{}, p); err != nil {
				t.Fatalf("apply: %v", err)
			}
			evs := v.events(t)
			if len(evs) != tc.firings {
				t.Fatalf("want %d records, have %d", tc.firings, len(evs))
			}
			groups := byRevision(evs)
			if len(groups) != tc.wantTxns {
				t.Errorf("want %d transactions, have %d", tc.wantTxns, len(groups))
			}
			if n := len(groups[evs[0].Rev]); n != tc.wantPerTxnAt {
				t.Errorf("first transaction holds %d firings, want %d", n, tc.wantPerTxnAt)
			}
			for _, ev := range evs {
				for _, w := range ev.Writes {
					f, ok := v.get(t, w.Key)
					if !ok || f.ModRevision != ev.Rev || string(f.Value) != string(w.Value) {
						t.Errorf("%s: written at %d (%s), its record at %d", w.Key, f.ModRevision, f.Value, ev.Rev)
					}
				}
			}
			if st := e.Stats(); st.Txns != int64(tc.wantTxns) || st.KeysWritten != int64(tc.firings*tc.w) {
				t.Errorf("stats: %d txns, %d keys", st.Txns, st.KeysWritten)
			}
		})
	}
}

// A firing that read a value written earlier in the plan commits after its
// writer, even across transactions, and its record names the writer's revision.
func TestOwnReadsCommitAfterTheirWriter(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	cfg := testConfig()
	cfg.MaxTxnOps = 4 // one firing per transaction
	e := v.engine(t, &copyEval{}, cfg)
	a, b := facts.ServiceInstances("a"), facts.ServiceInstances("b")
	p := eval.Plan{RuleSetVersion: "v1", Firings: []eval.Firing{
		{Rule: "first", Reads: []eval.Read{{Key: a}}, Writes: []eval.Write{{Key: a, Value: []byte("1")}, {Key: facts.ServiceInstances("a2"), Value: []byte("1")}}},
		{Rule: "second", Reads: []eval.Read{{Key: a, Own: true}, {Key: b}}, Writes: []eval.Write{{Key: b, Value: []byte("2")}, {Key: facts.ServiceInstances("b2"), Value: []byte("1")}}},
	}}
	if err := e.apply(v.ctx, nil, &copyEval{}, p); err != nil {
		t.Fatal(err)
	}
	evs := v.events(t)
	if len(evs) != 2 || evs[0].Rule != "first" || evs[1].Rule != "second" || evs[0].Rev >= evs[1].Rev {
		t.Fatalf("records: %+v", evs)
	}
	if r := evs[1].Reads[0]; !r.Own || r.Rev != evs[0].Rev {
		t.Errorf("second's read of %s: %+v, want own at revision %d", a, r, evs[0].Rev)
	}
}

// When the writer of a value is stale, the firings that read that value
// are dropped with it and evaluated again; nothing stale commits.
func TestOwnReadDroppedWithStaleWriter(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine(t, &copyEval{}, testConfig())
	x := facts.ServiceInstances("x")
	v.put(t, x, "1") // the writer read x as absent: stale
	a, b, c := facts.EffectiveInstances("a"), facts.EffectiveInstances("b"), facts.EffectiveInstances("c")
	p := eval.Plan{RuleSetVersion: "v1", Firings: []eval.Firing{
		{Rule: "writer", Reads: []eval.Read{{Key: x}}, Writes: []eval.Write{{Key: a, Value: []byte("1")}}},
		{Rule: "reader", Reads: []eval.Read{{Key: a, Own: true}}, Writes: []eval.Write{{Key: b, Value: []byte("2")}}},
		{Rule: "bystander", Reads: []eval.Read{{Key: c}}, Writes: []eval.Write{{Key: c, Value: []byte("3")}}},
	}}
	if err := e.mirror.WaitRev(v.ctx, 2); err != nil {
		t.Fatal(err)
	}
	ev := &copyEval{version: "v1"}
	if err := e.apply(v.ctx, nil, ev, p); err != nil {
		t.Fatal(err)
	}
	evs := v.events(t) // the bystander, then copy's firing for x evaluated again
	if len(evs) != 2 || evs[0].Rule != "bystander" || evs[1].Rule != "copy" {
		t.Fatalf("want the bystander and the re-evaluated copy committed, have %+v", evs)
	}
	for _, k := range []string{a, b} {
		if _, ok := v.get(t, k); ok {
			t.Errorf("%s written by a stale firing", k)
		}
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	// The dropped firings' writes too: a binding that read them in the
	// round may have concluded nothing and has no firing to drop.
	if len(ev.calls) != 1 || ev.calls[0] != x+","+a+","+b {
		t.Errorf("re-evaluated with %v, want the stale key, the orphaned read and the dropped writes (%s,%s,%s)", ev.calls, x, a, b)
	}
}

// A firing dropped as stale took back a write that other bindings of its
// round read and, seeing it, planned nothing for: no firing of theirs is
// dropped with it, so the write's key is evaluated again. (A stop that
// deleted an instance's placement, dropped as stale: the endpoint that the
// same round withheld from the instance must be published.)
func TestDroppedWriteEvaluatedAgain(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine(t, &copyEval{}, testConfig())
	a, x := facts.ServiceInstances("a"), facts.ServiceInstances("x")
	v.put(t, a, "3")
	rev := v.put(t, x, "1") // the stop read x as absent: stale
	if err := e.mirror.WaitRev(v.ctx, rev); err != nil {
		t.Fatal(err)
	}
	// In its round the stop deleted a, so copy planned nothing for a
	// (desired and effective both absent in the round's view).
	p := eval.Plan{RuleSetVersion: "v1", Firings: []eval.Firing{
		{Rule: "stop", Reads: []eval.Read{{Key: x}}, Writes: []eval.Write{{Key: a}}},
	}}
	ev := &copyEval{version: "v1"}
	if err := e.apply(v.ctx, nil, ev, p); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.get(t, a); !ok {
		t.Fatalf("%s deleted by a stale firing", a)
	}
	if f, ok := v.get(t, facts.EffectiveInstances("a")); !ok || string(f.Value) != "3" {
		t.Errorf("effective/service/a/instances = %q (present %v): the binding the dropped write hid was not evaluated again", f.Value, ok)
	}
}

// A leader whose key is gone writes nothing, whatever it planned.
func TestDeposedLeaderWritesNothing(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine(t, &copyEval{}, testConfig())
	lease, err := v.store.Grant(v.ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	key := "/ccattler-leader/test"
	// The election key lies beside the root: no fact, so no schema check.
	rev, err := v.store.WithRoot("/ccattler-leader/").Commit(v.ctx,
		facts.Txn{Ops: []facts.Op{{Key: "test", Value: []byte("engine-a"), Lease: lease}}, Checked: true})
	if err != nil {
		t.Fatal(err)
	}
	tm := &term{key: key, rev: rev}
	if err := e.apply(v.ctx, tm, &copyEval{}, countPlan(2, 1)); err != nil {
		t.Fatalf("apply as leader: %v", err)
	}
	if err := v.store.Revoke(v.ctx, lease); err != nil {
		t.Fatal(err)
	}
	err = e.apply(v.ctx, tm, &copyEval{}, countPlan(4, 2))
	if !errors.Is(err, errLostLeadership) {
		t.Fatalf("apply after losing the key: %v, want errLostLeadership", err)
	}
	if n := len(v.events(t)); n != 2 {
		t.Errorf("want the 2 records of the first term only, have %d", n)
	}
	if _, ok := v.get(t, facts.EffectiveInstances("s3-1")); ok {
		t.Error("a deposed leader wrote")
	}
}

// Firings that can never commit are reported and skipped; the rest commit.
func TestUncommittableFiringsSkipped(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	cfg := testConfig()
	cfg.MaxTxnOps = 4
	cfg.MaxTxnBytes = 4096
	e := v.engine(t, &copyEval{}, cfg)
	k := facts.EffectiveInstances
	p := eval.Plan{RuleSetVersion: "v1", Firings: []eval.Firing{
		{Rule: "bad-value", Writes: []eval.Write{{Key: k("a"), Value: []byte(`"three"`)}}},
		{Rule: "unknown-key", Writes: []eval.Write{{Key: "nowhere/x", Value: []byte(`1`)}}},
		{Rule: "twice", Writes: []eval.Write{{Key: k("b"), Value: []byte(`1`)}, {Key: k("b"), Value: []byte(`2`)}}},
		{Rule: "too-big", Writes: []eval.Write{{Key: k("c"), Value: []byte(`1`)}, {Key: k("d"), Value: []byte(`1`)},
			{Key: k("e"), Value: []byte(`1`)}, {Key: k("f"), Value: []byte(`1`)}}},
		{Rule: "too-many-bytes", Writes: []eval.Write{{Key: facts.AuthRules("big"), Value: []byte(`"` + strings.Repeat("a", 5000) + `"`)}}},
		{Rule: "good", Writes: []eval.Write{{Key: k("g"), Value: []byte(`7`)}}},
	}}
	if err := e.apply(v.ctx, nil, &copyEval{}, p); err != nil {
		t.Fatal(err)
	}
	evs := v.events(t)
	if len(evs) != 1 || evs[0].Rule != "good" {
		t.Fatalf("want only rule good committed, have %+v", evs)
	}
	if st := e.Stats(); st.Rejected != 5 {
		t.Errorf("want 5 rejected firings, have %d", st.Rejected)
	}
}

// Firing records past retention are deleted oldest first, in batches.
func TestEventRetention(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		maxCount int
		maxAge   time.Duration
		old      int // records from 2020
		fresh    int // records committed now
		want     int // records deleted
	}{
		{"by count", 5, 0, 0, 8, 3},
		{"by age", 0, time.Hour, 3, 4, 3},
		{"by count and age", 5, time.Hour, 3, 4, 3},
		{"count beyond the old ones", 2, time.Hour, 3, 4, 5},
		{"nothing due", 100, time.Hour, 0, 4, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t)
			cfg := testConfig()
			cfg.MaxTxnOps = 4 // deletes in several batches
			cfg.EventMaxCount, cfg.EventMaxAge = tc.maxCount, tc.maxAge
			e := v.engine(t, &copyEval{}, cfg)
			for i := 0; i < tc.old; i++ {
				v.put(t, facts.Event(fmt.Sprintf("20200101T000000.00000000%dZ-000001", i)), `{"rule": "old"}`)
			}
			if err := e.apply(v.ctx, nil, &copyEval{}, countPlan(tc.fresh, 1)); err != nil {
				t.Fatal(err)
			}
			before := v.events(t)
			if err := v.mirror.WaitRev(v.ctx, e.lastRev); err != nil {
				t.Fatal(err)
			}
			n, err := e.prune(v.ctx, nil, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Errorf("deleted %d records, want %d", n, tc.want)
			}
			after := v.events(t)
			if len(after) != len(before)-tc.want {
				t.Fatalf("%d records left, want %d", len(after), len(before)-tc.want)
			}
			for i := range after { // the newest stay
				if after[i].Key != before[tc.want+i].Key {
					t.Errorf("kept %s, want %s", after[i].Key, before[tc.want+i].Key)
				}
			}
		})
	}
}

// Without etcd the committer stalls and retries the same transaction; when
// etcd is back the plan commits, once.
func TestStallsWhileEtcdIsDown(t *testing.T) {
	t.Parallel()
	// No running mirror here: its watch would hold etcd's shutdown for
	// seconds, and a plan without conflicts does not need it.
	et := etcdtest.Start(t)
	store := et.Store(t)
	v := &env{etcd: et, store: store, mirror: facts.NewMirror(store, nil), ctx: context.Background()}
	cfg := testConfig()
	cfg.CommitTimeout = 200 * time.Millisecond
	e := v.engine(t, &copyEval{}, cfg)
	v.etcd.Close()
	done := make(chan error, 1)
	go func() { done <- e.apply(v.ctx, nil, &copyEval{}, countPlan(3, 1)) }()
	time.Sleep(400 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("apply returned while etcd was down: %v", err)
	default:
	}
	v.etcd.Restart(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("apply did not finish after etcd came back")
	}
	if n := len(v.events(t)); n != 3 {
		t.Errorf("want 3 records, have %d", n)
	}
	if st := e.Stats(); st.Unavailable < 1 || st.Txns != 1 {
		t.Errorf("want failed attempts then one transaction: %+v", st)
	}
}

// A prefix read ("no key under it") becomes a ranged compare; an aggregate
// member (NoGuard) is recorded but not compared.
func TestPrefixAndUnguardedReads(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine(t, &copyEval{}, testConfig())
	taken := facts.InstanceState("abcde")
	member := facts.ServiceInstances("member")
	v.put(t, taken, `"pending"`) // under the prefix the first firing read as empty
	v.put(t, member, "1")        // changed since the second firing read it at 1
	ok, blocked := facts.EffectiveInstances("ok"), facts.EffectiveInstances("blocked")
	p := eval.Plan{RuleSetVersion: "v1", Firings: []eval.Firing{
		{Rule: "absent", Reads: []eval.Read{{Key: "observed/instance/abcde/", Prefix: true}, {Key: blocked}},
			Writes: []eval.Write{{Key: blocked, Value: []byte("1")}}},
		{Rule: "aggregate", Reads: []eval.Read{{Key: member, Rev: 1, NoGuard: true}, {Key: ok}},
			Writes: []eval.Write{{Key: ok, Value: []byte("2")}}},
	}}
	if err := v.mirror.WaitRev(v.ctx, 3); err != nil {
		t.Fatal(err)
	}
	ev := &copyEval{version: "v1"}
	if err := e.apply(v.ctx, nil, ev, p); err != nil {
		t.Fatal(err)
	}
	if _, found := v.get(t, blocked); found {
		t.Error("the firing that read an empty prefix committed although a key is under it now")
	}
	evs := v.events(t)
	if len(evs) != 1 || evs[0].Rule != "aggregate" || evs[0].Reads[0].Rev != 1 {
		t.Fatalf("want the aggregate's record only, with the member read at 1: %+v", evs)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.calls) != 1 || ev.calls[0] != blocked+","+taken {
		t.Errorf("re-evaluated with %v, want the dropped write and the key now under the prefix (%s,%s)", ev.calls, blocked, taken)
	}
}

// A transaction that committed but whose answer was lost is attempted
// again with the same record ids: the first record is there, so the
// attempt fails, and the engine knows the chunk committed. Nothing is
// written twice.
func TestLostAnswerNotWrittenTwice(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.engine(t, &copyEval{}, testConfig())
	lost := 0
	e.loseAnswer = func() bool { lost++; return lost == 1 }
	if err := e.apply(v.ctx, nil, &copyEval{}, countPlan(3, 2)); err != nil {
		t.Fatal(err)
	}
	evs := v.events(t)
	if len(evs) != 3 || len(byRevision(evs)) != 1 {
		t.Fatalf("want 3 records in one transaction, have %+v", evs)
	}
	st := e.Stats()
	if st.Txns != 1 || st.Unavailable != 1 || st.Conflicts != 1 || st.Reevaluated != 0 {
		t.Errorf("want one commit, one lost answer, one failed retry and nothing re-evaluated: %+v", st)
	}
	if e.lastRev != evs[0].Rev {
		t.Errorf("engine believes its last commit is at %d, records are at %d", e.lastRev, evs[0].Rev)
	}
}

// An engine configured above etcd's own --max-txn-ops learns the limit from
// etcd's refusal and goes on in smaller transactions.
func TestLimitAboveEtcdsIsLowered(t *testing.T) {
	t.Parallel()
	ec := embedded.NewConfig()
	ec.MaxTxnOps = 128 // etcd's default, as an external cluster has it
	ec.DataDir = t.TempDir()
	ec.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	ec.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	et := &etcdtest.Etcd{Cfg: ec}
	et.Restart(t)
	t.Cleanup(func() { et.Close() })
	v := envOn(t, et)
	cfg := testConfig()
	cfg.MaxTxnOps = 1000
	e := v.engine(t, &copyEval{}, cfg)
	if err := e.apply(v.ctx, nil, &copyEval{}, countPlan(200, 1)); err != nil {
		t.Fatal(err)
	}
	if n := len(v.events(t)); n != 200 {
		t.Fatalf("want 200 records, have %d", n)
	}
	// 400 operations refused; 200 refused; 100 fit in 128.
	if st := e.Stats(); st.Txns != 4 || e.opsLimit() != 100 {
		t.Errorf("want 4 transactions under a limit of 100 ops, have %d under %d", st.Txns, e.opsLimit())
	}
}

// keepingEval is copyEval that counts the plans whose firings it was told
// did not all commit.
type keepingEval struct {
	copyEval
	uncommitted atomic.Int32
}

func (k *keepingEval) Uncommitted() { k.uncommitted.Add(1) }

// An evaluator may keep what it saw fire (the bindings a choice placed): it is
// told when a plan's firing was dropped, and only then.
func TestUncommittedFiringsAreReported(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	x := facts.ServiceInstances("x")
	a, c := facts.EffectiveInstances("a"), facts.EffectiveInstances("c")
	ev := &keepingEval{copyEval: copyEval{version: "v1"}}
	e := v.engine(t, ev, testConfig())
	clean := eval.Plan{RuleSetVersion: "v1", Firings: []eval.Firing{
		{Rule: "bystander", Reads: []eval.Read{{Key: c}}, Writes: []eval.Write{{Key: c, Value: []byte("3")}}},
	}}
	if err := e.apply(v.ctx, nil, ev, clean); err != nil {
		t.Fatal(err)
	}
	if n := ev.uncommitted.Load(); n != 0 {
		t.Fatalf("a plan that committed whole was reported uncommitted %d times", n)
	}
	rev := v.put(t, x, "1") // the writer below read x as absent: stale
	if err := e.mirror.WaitRev(v.ctx, rev); err != nil {
		t.Fatal(err)
	}
	stale := eval.Plan{RuleSetVersion: "v1", Firings: []eval.Firing{
		{Rule: "writer", Reads: []eval.Read{{Key: x}}, Writes: []eval.Write{{Key: a, Value: []byte("1")}}},
	}}
	if err := e.apply(v.ctx, nil, ev, stale); err != nil {
		t.Fatal(err)
	}
	if n := ev.uncommitted.Load(); n != 1 {
		t.Fatalf("a plan whose firing was dropped as stale was reported %d times, want once", n)
	}
}
