package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// fulls counts the evaluator's full evaluations.
func (c *copyEval) fulls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.calls {
		if s == "full" {
			n++
		}
	}
	return n
}

func (c *copyEval) called(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.calls, func(s string) bool { return slices.Contains(strings.Split(s, ","), key) })
}

// endTerm revokes the engine's election lease behind its back, as etcd
// does when the session's keepalives go unanswered for its TTL.
func endTerm(t *testing.T, v *env) {
	t.Helper()
	keys := leaderKeys(t, v)
	if len(keys) == 0 {
		t.Fatal("no election key")
	}
	if _, err := v.store.RevokeAt(v.ctx, facts.LeaseID(keys[0].Lease)); err != nil {
		t.Fatal(err)
	}
}

// leadingWithOne runs one engine on a copyEval until it has copied
// service one's count.
func leadingWithOne(t *testing.T) (*env, *copyEval, *Engine) {
	t.Helper()
	v := newEnv(t)
	ev := &copyEval{version: "v1"}
	e := v.engine(t, ev, testConfig())
	v.run(t, e)
	v.put(t, facts.ServiceInstances("one"), "1")
	v.waitValue(t, facts.EffectiveInstances("one"), "1")
	return v, ev, e
}

// An engine whose term ended with nobody else campaigning is elected again
// and goes on from where its rounds were, without evaluating everything:
// at 100,000 instances that full round is a minute under the very load
// that ended the term.
func TestReelectedEngineGoesOn(t *testing.T) {
	v, ev, e := leadingWithOne(t)

	endTerm(t, v)
	waitFor(t, "a second term", 10*time.Second, func() bool { st := e.Stats(); return st.Terms == 2 && st.Leading })
	v.put(t, facts.ServiceInstances("two"), "2")
	v.waitValue(t, facts.EffectiveInstances("two"), "2")
	if n := ev.fulls(); n != 1 {
		t.Errorf("full evaluations: %d, want 1 (the first term's)", n)
	}
	if st := e.Stats(); st.FullRounds != 1 {
		t.Errorf("Stats.FullRounds = %d, want 1", st.FullRounds)
	}
}

// A term that ends while its plan commits leaves firings unwritten that
// the evaluator saw fire. The next term evaluates them again first, with
// Incremental over the keys they read and wrote: no change would bring
// them back otherwise.
func TestTermEndedMidPlanIsEvaluatedAgain(t *testing.T) {
	v, ev, e := leadingWithOne(t)

	ended := false
	ev.setHook(func(p *eval.Plan) {
		for _, f := range p.Firings {
			if f.Bindings["name"] == "x" && !ended {
				ended = true
				endTerm(t, v) // the plan's commit then fails its leadership guard
			}
		}
	})
	v.put(t, facts.ServiceInstances("x"), "3")
	waitFor(t, "a second term", 10*time.Second, func() bool { st := e.Stats(); return st.Terms == 2 && st.Leading })
	v.waitValue(t, facts.EffectiveInstances("x"), "3")
	if !ended {
		t.Fatal("the hook never ended the term")
	}
	if n := ev.fulls(); n != 1 {
		t.Errorf("full evaluations: %d, want 1: the second term evaluates what the first left, not everything", n)
	}
	if !ev.called(facts.ServiceInstances("x")) {
		t.Error("no incremental evaluation named x's desired count")
	}
	if _, ok := v.get(t, facts.EffectiveInstances("one")); !ok {
		t.Error("effective count of one lost")
	}
}

// An engine that lost its term to a standby keeps its rounds' state only
// for resumeWindow: it would otherwise queue every change of the cluster
// while it waits. Leading again after that, it evaluates everything.
func TestHandedOnStateExpires(t *testing.T) {
	old := resumeWindow
	resumeWindow = 300 * time.Millisecond
	t.Cleanup(func() { resumeWindow = old })

	a := newEnv(t)
	b := envOn(t, a.etcd)
	evA := &copyEval{version: "v1"}
	ea := a.engine(t, evA, testConfig())
	a.run(t, ea)
	waitFor(t, "engine-a leads", 5*time.Second, func() bool { return ea.Stats().Leading })
	cfgB := testConfig()
	cfgB.Identity = "engine-b"
	eb := b.engine(t, &copyEval{version: "v1"}, cfgB)
	stopB := b.run(t, eb)
	waitFor(t, "engine-b campaigns", 5*time.Second, func() bool { return len(leaderKeys(t, a)) == 2 })

	endTerm(t, a)
	waitFor(t, "engine-b takes over", 10*time.Second, func() bool { return eb.Stats().Leading })
	waitFor(t, "engine-a's state dropped", 5*time.Second, func() bool {
		ea.resumeMu.Lock()
		defer ea.resumeMu.Unlock()
		return ea.resume == nil && !ea.Stats().Leading
	})
	b.put(t, facts.ServiceInstances("two"), "2")
	b.waitValue(t, facts.EffectiveInstances("two"), "2")

	stopB()
	waitFor(t, "engine-a leads again", 10*time.Second, func() bool { return ea.Stats().Leading })
	a.put(t, facts.ServiceInstances("three"), "3")
	a.waitValue(t, facts.EffectiveInstances("three"), "3")
	if n := evA.fulls(); n != 2 {
		t.Errorf("engine-a's full evaluations: %d, want 2: its state expired while engine-b led", n)
	}
}
