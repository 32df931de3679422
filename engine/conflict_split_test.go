package engine

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// While other writers keep rewriting facts a plan read, a large
// transaction finds one of its reads stale on every attempt. After each
// conflict in a row the next transaction is half as large, so the plan
// commits in smaller ones instead of being given up after RetryLimit
// conflicts (which costs a full round: a minute at 100,000 instances).
// Here every transaction of more than 10 firings has one of its reads
// rewritten just before it is sent.
func TestConflictsShrinkTheTransaction(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ev := &copyEval{version: "v1"}
	e := v.engine(t, ev, testConfig())
	const n = 200
	var last int64
	for i := range n {
		last = v.put(t, facts.ServiceInstances(fmt.Sprintf("s%03d", i)), "1")
	}
	if err := v.mirror.WaitRev(v.ctx, last); err != nil {
		t.Fatal(err)
	}
	var p eval.Plan
	v.mirror.View(func(r facts.Reader) { p = ev.Full(r) })
	if len(p.Firings) != n {
		t.Fatalf("plan of %d firings, want %d", len(p.Firings), n)
	}
	sizes := []int{}
	e.beforeCommit = func(chunk []*staged) {
		sizes = append(sizes, len(chunk))
		if len(chunk) > 10 { // a writer gets there first
			k := chunk[len(chunk)-1].f.Reads[0].Key
			if _, err := etcdtest.PutRaw(v.ctx, v.store, k, "1"); err != nil {
				t.Error(err)
			}
		}
	}
	if err := e.apply(v.ctx, nil, ev, p); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if st.GaveUp != 0 {
		t.Errorf("the plan was given up %d times; transaction sizes %v", st.GaveUp, sizes)
	}
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		if _, ok := v.get(t, facts.EffectiveInstances(name)); !ok {
			t.Errorf("%s: no effective count; transaction sizes %v", name, sizes)
			break
		}
	}
	t.Logf("%d transactions attempted, %d conflicts, sizes %v", len(sizes), st.Conflicts, sizes)
}
