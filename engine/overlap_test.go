package engine

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// overlapConfig is testConfig with the next round evaluated while a plan
// commits.
func overlapConfig() Config {
	c := testConfig()
	c.OverlapCommit = true
	return c
}

// eachCommitMode runs test with plans committed before the next round
// (the default) and while it evaluates (Config.OverlapCommit).
func eachCommitMode(t *testing.T, test func(t *testing.T, cfg Config)) {
	t.Parallel()
	for _, overlap := range []bool{false, true} {
		name := "serial"
		if overlap {
			name = "overlap"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.OverlapCommit = overlap
			test(t, cfg)
		})
	}
}

// chainEval derives in two steps, one per round: effective x copies
// desired x, and effective y copies effective x. The second step reads
// the first's write, so the round after the first plans on it.
type chainEval struct {
	mu    sync.Mutex
	views []chainView // what each call saw and planned
}

type chainView struct {
	x      facts.Fact // effective x as the view held it
	xOK    bool
	firing []string // the rules that fired
}

var (
	chainDX = facts.ServiceInstances("x")
	chainEX = facts.EffectiveInstances("x")
	chainEY = facts.EffectiveInstances("y")
)

func (c *chainEval) Version() string                                        { return "chain-v1" }
func (c *chainEval) Full(r facts.Reader) eval.Plan                          { return c.plan(r) }
func (c *chainEval) Incremental(r facts.Reader, _ []facts.Change) eval.Plan { return c.plan(r) }
func (c *chainEval) Continue(_ int64, r facts.Reader, _ []facts.Change, _ bool) eval.Plan {
	return c.plan(r)
}
func (c *chainEval) Uncommitted()         {}
func (c *chainEval) TimedRules() []string { return nil }

func (c *chainEval) plan(r facts.Reader) eval.Plan {
	p := eval.Plan{RuleSetVersion: "chain-v1", Rev: r.Rev()}
	d, dok := r.Get(chainDX)
	x, xok := r.Get(chainEX)
	y, yok := r.Get(chainEY)
	view := chainView{x: x, xOK: xok}
	if dok && (!xok || string(x.Value) != string(d.Value)) {
		p.Firings = append(p.Firings, eval.Firing{Rule: "x", Kind: "derive",
			Reads:  []eval.Read{{Key: chainDX, Rev: d.ModRevision}, {Key: chainEX, Rev: x.ModRevision}},
			Writes: []eval.Write{{Key: chainEX, Value: d.Value}}})
		view.firing = append(view.firing, "x")
	}
	if xok && (!yok || string(y.Value) != string(x.Value)) {
		p.Firings = append(p.Firings, eval.Firing{Rule: "y", Kind: "derive",
			Reads:  []eval.Read{{Key: chainEX, Rev: x.ModRevision}, {Key: chainEY, Rev: y.ModRevision}},
			Writes: []eval.Write{{Key: chainEY, Value: x.Value}}})
		view.firing = append(view.firing, "y")
	}
	c.mu.Lock()
	c.views = append(c.views, view)
	c.mu.Unlock()
	return p
}

func (c *chainEval) seen() []chainView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chainView(nil), c.views...)
}

// gate holds the first transaction that writes key until released.
type gate struct {
	key      string
	held     atomic.Bool   // the transaction is being held now
	arrived  chan struct{} // closed when it arrives
	release  chan struct{}
	once     sync.Once
	released sync.Once
}

// await waits until the held transaction arrived.
func (g *gate) await(t *testing.T) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the first plan never reached etcd")
	}
}

func newGate(key string) *gate {
	return &gate{key: key, arrived: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) hold(chunk []*staged) {
	for _, st := range chunk {
		for _, w := range st.f.Writes {
			if w.Key != g.key {
				continue
			}
			first := false
			g.once.Do(func() { first = true })
			if !first {
				return
			}
			g.held.Store(true)
			close(g.arrived)
			<-g.release
			g.held.Store(false)
			return
		}
	}
}

func (g *gate) open() { g.released.Do(func() { close(g.release) }) }

// The round after a plan is evaluated while that plan's transaction is
// still held, on a view that has the plan's writes (read-your-writes) that
// no other reader of the mirror sees; its firing that read such a write
// commits, guarded by the revision the write committed at.
func TestNextRoundEvaluatesWhilePlanCommits(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.put(t, chainDX, "3")
	ev := &chainEval{}
	e := v.engine(t, ev, overlapConfig())
	g := newGate(chainEX)
	defer g.open()
	e.beforeCommit = g.hold
	v.run(t, e)

	g.await(t)
	v.put(t, facts.ServiceInstances("z"), "1") // a change: another round
	waitFor(t, "a round that plans on the held write", 20*time.Second, func() bool {
		for _, s := range ev.seen() {
			if s.xOK {
				return true
			}
		}
		return false
	})
	if !g.held.Load() {
		t.Fatal("the first plan's transaction was released before the next round was evaluated")
	}
	var planned chainView
	for _, s := range ev.seen() {
		if s.xOK {
			planned = s
			break
		}
	}
	if string(planned.x.Value) != "3" || planned.x.ModRevision != facts.Uncommitted {
		t.Errorf("the next round read %s = %q at revision %d, want the held write 3 at facts.Uncommitted", chainEX, planned.x.Value, planned.x.ModRevision)
	}
	if len(planned.firing) != 1 || planned.firing[0] != "y" {
		t.Errorf("the next round fired %v, want y alone (x's write was already in its view)", planned.firing)
	}
	var visible bool
	v.mirror.View(func(r facts.Reader) { _, visible = r.Get(chainEX) })
	if visible {
		t.Errorf("another reader of the mirror sees %s before it committed", chainEX)
	}
	if _, ok := v.get(t, chainEX); ok {
		t.Fatalf("%s in etcd while its transaction is held", chainEX)
	}

	g.open()
	x := v.waitValue(t, chainEX, "3")
	y := v.waitValue(t, chainEY, "3")
	evs := v.events(t)
	if len(evs) != 2 || evs[0].Rule != "x" || evs[1].Rule != "y" {
		t.Fatalf("records: %+v, want x then y", evs)
	}
	if evs[0].Rev != x.ModRevision || evs[1].Rev != y.ModRevision {
		t.Errorf("records at %d and %d, writes at %d and %d", evs[0].Rev, evs[1].Rev, x.ModRevision, y.ModRevision)
	}
	var readX *facts.EventRead
	for i := range evs[1].Reads {
		if evs[1].Reads[i].Key == chainEX {
			readX = &evs[1].Reads[i]
		}
	}
	if readX == nil || readX.Rev != x.ModRevision {
		t.Errorf("y's record read of %s: %+v, want the revision its write committed at (%d)", chainEX, readX, x.ModRevision)
	}
	st := e.Stats()
	if st.Conflicts != 0 {
		t.Errorf("conflicts %d: the read of the laid write was not given its revision", st.Conflicts)
	}
	if st.ApplyOverlapTime <= 0 {
		t.Errorf("ApplyOverlapTime %v: no commit overlapped an evaluation", st.ApplyOverlapTime)
	}
}

// A plan whose transaction fails its guard (a fact it read changed) takes
// down with it what the round evaluated meanwhile planned on its writes:
// nothing built on them commits, and the engine reaches the state the
// facts call for.
func TestFailedCommitDiscardsWhatWasPlannedOnIt(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.put(t, chainDX, "3")
	ev := &chainEval{}
	e := v.engine(t, ev, overlapConfig())
	g := newGate(chainEX)
	defer g.open()
	e.beforeCommit = g.hold
	v.run(t, e)

	g.await(t)
	v.put(t, chainDX, "5") // the held firing read 3: its guard fails
	waitFor(t, "a round that plans on the held write", 20*time.Second, func() bool {
		for _, s := range ev.seen() {
			if s.xOK && string(s.x.Value) == "3" {
				return true
			}
		}
		return false
	})
	if !g.held.Load() {
		t.Fatal("the held transaction was released before the next round was evaluated")
	}
	g.open()
	v.waitValue(t, chainEX, "5")
	v.waitValue(t, chainEY, "5")
	waitFor(t, "the engine to settle", 20*time.Second, func() bool { return e.Stats().SettledRev >= v.mirror.Rev() })

	for _, r := range v.events(t) {
		for _, w := range r.Writes {
			if string(w.Value) == "3" {
				t.Errorf("record %s (rule %s) wrote %s = 3: planned on a write that never committed", r.Key, r.Rule, w.Key)
			}
		}
	}
	// One conflict, the held firing's: the firings planned on its write
	// were dropped when it landed, not sent to fail their compares.
	st := e.Stats()
	if st.Conflicts != 1 || st.Reevaluated < 1 {
		t.Errorf("want one conflict and a re-evaluation, stats %+v", st)
	}
	if y, _ := v.get(t, chainEY); string(y.Value) != "5" {
		t.Errorf("%s = %s, want 5", chainEY, y.Value)
	}
}

// A rule set swapped in while a plan commits evaluates everything on
// committed state: its full round waits for the plan to land, and never
// sees a write that might not commit.
func TestSwapWaitsForThePlanInFlight(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.put(t, chainDX, "3")
	e := v.engine(t, &chainEval{}, overlapConfig())
	g := newGate(chainEX)
	defer g.open()
	e.beforeCommit = g.hold
	v.run(t, e)

	g.await(t)
	swapped := &chainEval{}
	e.Swap(swapped)
	// Long enough for a full round that did not wait to have run: one
	// that waits for the plan passes whatever this is.
	time.Sleep(200 * time.Millisecond)
	if n := len(swapped.seen()); n != 0 {
		t.Fatalf("the swapped-in rule set evaluated %d times while the plan was held", n)
	}
	g.open()
	x := v.waitValue(t, chainEX, "3")
	v.waitValue(t, chainEY, "3")
	views := swapped.seen()
	if len(views) == 0 || !views[0].xOK || views[0].x.ModRevision != x.ModRevision {
		t.Fatalf("the swapped-in set's first view: %+v, want %s at its committed revision %d", views, chainEX, x.ModRevision)
	}
}

// Without Config.OverlapCommit the round after a plan is evaluated only
// once the plan committed: the held transaction holds the round loop.
func TestSerialCommitHoldsTheNextRound(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.put(t, chainDX, "3")
	ev := &chainEval{}
	e := v.engine(t, ev, testConfig())
	g := newGate(chainEX)
	defer g.open()
	e.beforeCommit = g.hold
	v.run(t, e)

	g.await(t)
	v.put(t, facts.ServiceInstances("z"), "1") // a change: another round, once the plan committed
	// Long enough for a round that did not wait to have run: one that
	// waits passes whatever this is.
	time.Sleep(200 * time.Millisecond)
	if n := len(ev.seen()); n != 1 {
		t.Fatalf("%d evaluations while the first plan's transaction was held, want 1", n)
	}
	g.open()
	x := v.waitValue(t, chainEX, "3")
	v.waitValue(t, chainEY, "3")
	for _, s := range ev.seen() {
		if s.xOK && s.x.ModRevision != x.ModRevision {
			t.Errorf("a round read %s at revision %d, want only its committed revision %d", chainEX, s.x.ModRevision, x.ModRevision)
		}
	}
	if st := e.Stats(); st.ApplyOverlapTime != 0 || st.ApplyTime <= 0 {
		t.Errorf("ApplyTime %v, ApplyOverlapTime %v: want the commit waited for, none overlapped", st.ApplyTime, st.ApplyOverlapTime)
	}
}

// A leader whose session ends while a plan is in flight writes nothing
// more: the held transaction fails its leader compare, the plan evaluated
// on it is not committed, and the standby that takes over evaluates
// committed state and writes both steps itself.
func TestLeadershipLostDuringAnOverlappedCommit(t *testing.T) {
	t.Parallel()
	a := newEnv(t)
	b := envOn(t, a.etcd)
	a.put(t, chainDX, "3")
	cfgA, cfgB := overlapConfig(), overlapConfig()
	cfgB.Identity = "engine-b"
	evA := &chainEval{}
	ea := a.engine(t, evA, cfgA)
	g := newGate(chainEX)
	defer g.open()
	ea.beforeCommit = g.hold
	a.run(t, ea)
	g.await(t)
	eb := b.engine(t, &chainEval{}, cfgB)
	b.run(t, eb)
	a.put(t, facts.ServiceInstances("z"), "1") // a change: engine-a plans y on its held write
	waitFor(t, "engine-a plans on the held write", 20*time.Second, func() bool {
		for _, s := range evA.seen() {
			if s.xOK {
				return true
			}
		}
		return false
	})
	var keys []facts.Fact
	waitFor(t, "engine-b campaigns", 20*time.Second, func() bool { keys = leaderKeys(t, a); return len(keys) == 2 })
	if string(keys[0].Value) != "engine-a" {
		t.Fatalf("election keys: %v", keys)
	}
	bRev, err := a.store.RevokeAt(a.ctx, facts.LeaseID(keys[0].Lease))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "engine-b takes over", 20*time.Second, func() bool { return eb.Stats().Leading })
	g.open()
	a.waitValue(t, chainEX, "3")
	a.waitValue(t, chainEY, "3")
	waitFor(t, "engine-a steps down", 20*time.Second, func() bool { return !ea.Stats().Leading })
	for _, r := range a.events(t) {
		if r.Leader != "engine-b" || r.Rev <= bRev {
			t.Errorf("record %s (rule %s) by %s at %d; want every record by engine-b, after its election at %d", r.Key, r.Rule, r.Leader, r.Rev, bRev)
		}
	}
}

// A shutdown while a plan is in flight stops it and the round loop: Run
// returns, the held transaction does not commit, nor does anything
// planned on its writes.
func TestShutdownStopsThePlanInFlight(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.put(t, chainDX, "3")
	ev := &chainEval{}
	e := v.engine(t, ev, overlapConfig())
	g := newGate(chainEX)
	defer g.open()
	e.beforeCommit = g.hold
	stop := v.run(t, e)
	g.await(t)
	v.put(t, facts.ServiceInstances("z"), "1")
	waitFor(t, "a round that plans on the held write", 20*time.Second, func() bool {
		for _, s := range ev.seen() {
			if s.xOK {
				return true
			}
		}
		return false
	})
	stopped := make(chan struct{})
	go func() { defer close(stopped); stop() }()
	// The transaction is sent once released, with the term's context
	// already over.
	time.Sleep(50 * time.Millisecond)
	g.open()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended with a plan in flight")
	}
	for _, k := range []string{chainEX, chainEY} {
		if f, ok := v.get(t, k); ok {
			t.Errorf("%s = %s committed after the shutdown", k, f.Value)
		}
	}
	if evs := v.events(t); len(evs) != 0 {
		t.Errorf("records after the shutdown: %+v", evs)
	}
}

// cutEval is chainEval whose first step says its round was cut at its
// budget (eval.Plan.More). Once per probe key it finds in its view, it
// writes a fact, waits until the mirror holds that write back for the
// view to end, and notes what the engine's Pending says then.
type cutEval struct {
	chainEval
	v       *env
	e       *Engine
	probes  map[string]string // probe key -> the key it writes, "" once probed
	mu      sync.Mutex
	pending map[string]bool // probe key -> Engine.Pending while the mirror held a write back
	errs    []error
	// fulls counts Full calls; incremental lists the keys Incremental
	// was asked about.
	fulls       int
	incremental []string
}

func (c *cutEval) Full(r facts.Reader) eval.Plan {
	c.mu.Lock()
	c.fulls++
	c.mu.Unlock()
	return c.cut(r)
}
func (c *cutEval) Continue(_ int64, r facts.Reader, _ []facts.Change, _ bool) eval.Plan {
	return c.cut(r)
}

func (c *cutEval) cut(r facts.Reader) eval.Plan {
	for key, write := range c.probes {
		if _, ok := r.Get(key); ok && write != "" {
			c.probes[key] = ""
			c.probe(key, write)
		}
	}
	p := c.plan(r)
	p.More = slices.ContainsFunc(p.Firings, func(f eval.Firing) bool { return f.Rule == "x" })
	return p
}

// Incremental notes the keys it is asked about, as a term that resumes
// asks about those the previous term left unsettled.
func (c *cutEval) Incremental(r facts.Reader, changes []facts.Change) eval.Plan {
	c.mu.Lock()
	for _, ch := range changes {
		c.incremental = append(c.incremental, ch.Key)
	}
	c.mu.Unlock()
	return c.plan(r)
}

// probe runs under the mirror's view: the write's watch event waits for it.
func (c *cutEval) probe(key, write string) {
	_, err := c.v.store.Commit(c.v.ctx, facts.Txn{Ops: []facts.Op{facts.Put(write, []byte("1"))}})
	held := err == nil
	for deadline := time.Now().Add(10 * time.Second); held && !c.v.mirror.Pending(); {
		if time.Now().After(deadline) {
			held = false
		}
		time.Sleep(time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !held {
		c.errs = append(c.errs, fmt.Errorf("probe %s: the mirror never held the write back (err %v)", key, err))
		return
	}
	c.pending[key] = c.e.Pending()
}

// heldCutRound runs an engine with the default config on ev, over
// desired x = 3, and returns once the cut round's transaction (x's) is
// held at the returned gate, which the test's end opens.
func heldCutRound(t *testing.T, ev *cutEval) (*env, *Engine, *gate) {
	t.Helper()
	v := newEnv(t)
	v.put(t, chainDX, "3")
	e := v.engine(t, ev, testConfig())
	ev.v, ev.e = v, e
	g := newGate(chainEX)
	e.beforeCommit = g.hold
	v.run(t, e)
	t.Cleanup(g.open) // after run's: cleanups run last first, and the engine's stop waits for the held flight
	g.await(t)
	return v, e, g
}

// A round cut at its budget has the next round's work in hand, so its plan
// commits while that round evaluates even without Config.OverlapCommit;
// a round that finished commits before the next. While a plan is in
// flight, watch events waiting for the mirror (its own writes coming back)
// do not make Engine.Pending end the round; with none in flight they do.
func TestCutRoundCommitsWhileTheNextEvaluates(t *testing.T) {
	t.Parallel()
	// x is in a view while its write is in flight, z once put at rest.
	inFlight, atRest := chainEX, facts.ServiceInstances("z")
	ev := &cutEval{pending: map[string]bool{}, probes: map[string]string{
		inFlight: facts.ServiceInstances("p1"), atRest: facts.ServiceInstances("p2")}}
	v, e, g := heldCutRound(t, ev)
	waitFor(t, "a round evaluated on the held write", 20*time.Second, func() bool {
		for _, s := range ev.seen() {
			if s.xOK && string(s.x.Value) == "3" {
				return true
			}
		}
		return false
	})
	g.open()
	v.waitValue(t, chainEY, "3")
	v.put(t, atRest, "1")
	waitFor(t, "the probe at rest", 20*time.Second, func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		_, ok := ev.pending[atRest]
		return ok || len(ev.errs) > 0
	})
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, err := range ev.errs {
		t.Error(err)
	}
	if p, ok := ev.pending[inFlight]; !ok || p {
		t.Errorf("Pending with a plan in flight: %v (probed %v), want false", p, ok)
	}
	if p := ev.pending[atRest]; !p {
		t.Errorf("Pending with no plan in flight and a watch event waiting: false, want true")
	}
	if st := e.Stats(); st.ApplyOverlapTime <= 0 {
		t.Errorf("ApplyOverlapTime %v: the cut round's plan did not commit while the next evaluated", st.ApplyOverlapTime)
	}
}

// A term that ends while a cut round's plan is in flight leaves two plans
// uncommitted: the flight's, which fails its leadership compare, and the
// one the next round planned on its writes. The term's state is handed on
// all the same, and the next term evaluates both plans' keys again first
// (Incremental over them), not everything.
func TestTermEndedMidFlightIsEvaluatedAgain(t *testing.T) {
	t.Parallel()
	ev := &cutEval{}
	v, e, g := heldCutRound(t, ev)
	waitFor(t, "the next round plans y on the held write", 20*time.Second, func() bool {
		for _, s := range ev.seen() {
			if slices.Contains(s.firing, "y") {
				return true
			}
		}
		return false
	})
	endTerm(t, v)
	g.open() // the held transaction now fails its leader compare
	waitFor(t, "a second term", 20*time.Second, func() bool { st := e.Stats(); return st.Terms == 2 && st.Leading })
	v.waitValue(t, chainEX, "3")
	v.waitValue(t, chainEY, "3")

	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.fulls != 1 {
		t.Errorf("full evaluations: %d, want 1: the second term goes on from the first's rounds", ev.fulls)
	}
	// The flight's firing read and wrote x (and read d); the plan made on
	// it wrote y.
	for _, k := range []string{chainDX, chainEX, chainEY} {
		if !slices.Contains(ev.incremental, k) {
			t.Errorf("the resumed term did not evaluate %s again (asked about %q)", k, ev.incremental)
		}
	}
}

// A round whose changes are only its own writes come back, laid over the
// view before (a plan committed while the next round evaluated), has
// nothing to evaluate: the evaluator is not called, and neither the
// rounds counted (Stats.Rounds) nor Config.OnRound count it. Both count
// the evaluator's calls, so that a bench's rounds are the ones evaluated.
func TestIdleRoundsAreNotCounted(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ev := &chainEval{}
	var told atomic.Int64
	cfg := overlapConfig()
	cfg.OnRound = func(RoundInfo) { told.Add(1) }
	e := v.engine(t, ev, cfg)
	// y's write is held until a round has evaluated with it laid: when it
	// comes back, the round it makes has nothing else to evaluate.
	g := newGate(chainEY)
	e.beforeCommit = g.hold
	v.run(t, e)
	t.Cleanup(g.open)
	v.put(t, chainDX, "3")
	g.await(t)
	v.put(t, facts.ServiceInstances("z"), "1") // a change, for a round over y's write laid
	waitFor(t, "a round on y's write laid", 20*time.Second, func() bool { return len(ev.seen()) >= 3 })
	g.open()
	v.waitValue(t, chainEY, "3")
	waitFor(t, "the engine at rest", 20*time.Second, func() bool {
		before := e.Stats()
		time.Sleep(300 * time.Millisecond)
		after := e.Stats()
		return after.EvalTime == before.EvalTime && after.Rounds == before.Rounds
	})
	calls, st := int64(len(ev.seen())), e.Stats()
	if st.Rounds != calls || told.Load() != calls {
		t.Errorf("%d rounds counted and %d told, for %d evaluations: want the same", st.Rounds, told.Load(), calls)
	}
}
