package eval

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// Option configures an Evaluator.
type Option func(*Evaluator)

// WithSeed seeds the generator fresh ids are drawn from, so a run can be
// replayed. The engine should seed from the clock and log the seed.
func WithSeed(seed uint64) Option { return func(e *Evaluator) { e.seed = seed } }

// WithClock sets what rules see as now (default time.Now).
func WithClock(now func() time.Time) Option { return func(e *Evaluator) { e.clock = now } }

// WithMaxPasses bounds the passes of a round's local fixpoint (default 16).
func WithMaxPasses(n int) Option { return func(e *Evaluator) { e.maxPasses = n } }

// WithoutAggregateCache recomputes every aggregate every time; tests use it
// to show that the cache changes nothing but the time.
func WithoutAggregateCache() Option { return func(e *Evaluator) { e.aggs.off = true } }

// WithoutKeepingAtRest says the caller stops once a round fires nothing,
// as ccattler rules plan and diff run each rule set to its fixpoint: such
// a round keeps no aggregate results for rounds to come. Keeping indexes
// every member fact of every result the round computed: rules plan at
// 100,000 instances spent 2.8 s of about 30 keeping what its two runs'
// last rounds computed. Should the caller go on, the next round starts
// without kept results, as after a reset.
func WithoutKeepingAtRest() Option { return func(e *Evaluator) { e.noKeepAtRest = true } }

// WithoutKeptCandidates solves a choice's candidates again in every round
// rather than keeping them while no fact they depend on changes
// (candkeep.go): for tests that keeping them changes nothing.
func WithoutKeptCandidates() Option { return func(e *Evaluator) { e.noKeptCands = true } }

// WithoutCandidateMemo evaluates every candidate a choice visits, none
// served from what the round found for it before (candmemo.go): for tests
// that its outcomes change nothing.
func WithoutCandidateMemo() Option { return func(e *Evaluator) { e.noCandMemo = true } }

// WithoutProbes queues and runs every task a change dispatches, also those
// a fact their binding names tells needless (probe.go); tests compare.
func WithoutProbes() Option { return func(e *Evaluator) { e.noProbes = true } }

// WithoutOwnBack dispatches a round's writes in full when they come back
// in the next call's changes, as any change (ownback.go); tests compare.
func WithoutOwnBack() Option { return func(e *Evaluator) { e.noOwnBack = true } }

// WithoutSharedJoins has every site a change reaches join it with its
// scope itself, none handed what an alike site's join found (sites.go):
// for tests that sharing changes nothing.
func WithoutSharedJoins() Option { return func(e *Evaluator) { e.noSharedJoins = true } }

// WithMaxAggregateReads sets how many member facts an aggregate lists in a
// firing's reads (default MaxAggregateReads). Which members are listed when
// there are more depends on how the result was reached; tests comparing
// plans exactly lift the bound.
func WithMaxAggregateReads(n int) Option { return func(e *Evaluator) { e.maxAggReads = n } }

// WithWholeAggregates sets when a round computes every group of an
// aggregate in one scan of its members (aggwhole.go): once the groups it
// computed one at a time have visited after facts (0: at the first; < 0:
// never). By default, once they have visited as many facts as the
// aggregate's smallest fact type holds.
func WithWholeAggregates(after int) Option {
	return func(e *Evaluator) { e.aggs.wholeAfter = int64(max(after, -1)) }
}

// WithMaxAdjust sets the largest batch of changes Continue adjusts kept
// aggregate results for (default: MaxAdjust or an eighth of the facts,
// whichever is more); a larger batch drops those it
// could alter. 0: never adjust.
func WithMaxAdjust(n int) Option { return func(e *Evaluator) { e.maxAdjust = n } }

// WithMaxFirings ends a round once its plan holds n firings (0, the
// default: no bound), between two tasks or two bindings of an action's
// task (a view's task is never cut): the tasks left are carried to the
// next Incremental, Continue or Tick call, whose first pass starts with the
// rules after the one the round was cut in, and the plan says so
// (Plan.More). A caller that commits each plan before the next
// call gets a large round's work committed in slices: the first writes
// reach etcd, and the agents, while the rest is still being evaluated, and
// memory holds one slice's plan rather than the whole round's. Each slice
// is a consistent prefix: its firings are guarded by what they read like
// any other, and the carried tasks are evaluated against the facts as they
// are when their turn comes, the slice's writes included.
func WithMaxFirings(n int) Option { return func(e *Evaluator) { e.maxFirings = n } }

// WithRoundBudget bounds what one rule may spend of a round: once its CEL
// evaluations have cost maxCost (0: no bound) or its tasks have run for
// maxTime (0: no bound), its tasks not yet run wait while the other rules
// go on, so that one costly rule cannot starve the others. Once no rule
// within its budget has work left, the rules over theirs get another
// (refill): a round the others leave idle is not wasted, since every
// round carries a fixed cost. The round ends, as with WithMaxFirings, once
// it has spent four such budgets (many costly rules, or one task over many
// bindings); the rest is carried, and the next round starts with the rules
// after the one it was cut in. A rule always runs at least one task, and
// one CEL evaluation is never interrupted (the rule set's per-evaluation
// cost limit bounds it); a view's task is not cut either, as with
// WithMaxFirings.
func WithRoundBudget(maxCost uint64, maxTime time.Duration) Option {
	return func(e *Evaluator) { e.maxCost, e.maxTime = maxCost, maxTime }
}

// WithYield gives the evaluator a way to learn that new facts are waiting
// (facts.Mirror.Pending): a rule over its budget then gets no other
// (WithRoundBudget's refill) and the round ends, so that a change waits
// for at most one rule budget rather than the round's whole bound.
func WithYield(pending func() bool) Option { return func(e *Evaluator) { e.yield = pending } }

// WithStop gives the evaluator a way to learn that its caller is going
// away (a server shutting down): once stopped reports true, the round ends
// at its next binding as at a budget (WithRoundBudget), its work carried,
// so that a long round does not hold a shutdown up. A view's task, never
// cut, and one CEL evaluation still run to their end.
func WithStop(stopped func() bool) Option { return func(e *Evaluator) { e.stop = stopped } }

// WithMaxAbsentKeys sets how many keys found absent a round interns to
// find them absent again without a look in the facts (default 65,536);
// past it, each is copied for each read. Tests lower it to cross the bound
// on small worlds.
func WithMaxAbsentKeys(n int) Option { return func(e *Evaluator) { e.maxAbsent = max(n, 0) } }

// WithMaxKeptReads sets how many accesses to the facts an aggregate
// result kept across rounds may depend on (default 16,384, about a
// thousand instances of one service): one that read more is computed
// again in every round that needs it. The store's indexes are rebuilt
// without stale entries once they hold more than four times as many.
// Tests lower it to cross both bounds on small worlds.
func WithMaxKeptReads(n int) Option {
	return func(e *Evaluator) {
		e.maxDeps = max(n, 1)
		e.aggs.store.least = 4 * e.maxDeps
		e.aggs.store.reset(e.aggs.store.rev)
	}
}

// WithMaxFresh bounds the fresh ids one binding may draw in a round (default 10000).
func WithMaxFresh(n int) Option { return func(e *Evaluator) { e.maxFresh = n } }

// Stats counts the evaluator's work since New; tests use it to show that an
// incremental round touches only the bindings a change affects.
type Stats struct {
	Rounds          int64  // Full and Incremental calls
	Tasks           int64  // (rule, partial binding) evaluations
	Bindings        int64  // bindings found by solving scopes
	Evals           int64  // CEL evaluations
	Cost            uint64 // CEL cost of the evaluations that track it (WithRoundBudget)
	FactsVisited    int64  // facts a join looked at
	TypeScans       int64  // joins that had to scan a whole fact type
	Firings         int64
	FreshCollisions int64 // fresh ids drawn again because taken
	BadValues       int64 // stored values that did not decode for their type (skipped)
	AggregateHits   int64 // aggregate groups served from the round's cache or the store
	// CandidatesReused counts choice candidates whose outcome a round
	// served again, its aggregates unchanged, instead of evaluating the
	// filters and score (candmemo.go).
	CandidatesReused int64
	// UnreadAggregates counts the aggregates served outcomes read that
	// were not looked up again, their groups unchanged (groupvers.go).
	UnreadAggregates int64
	// CandidatesKept counts choices' candidate lists taken from an
	// earlier round rather than solved again (candkeep.go).
	CandidatesKept  int64
	Aggregates      int64 // aggregate groups computed
	WholeAggregates int64 // aggregates computed for every group at once (WithWholeAggregates)
	WholeKept       int64 // rounds that began with an aggregate whole from the last (aggwhole.go), by aggregate
	Adjustments     int64 // results of an aggregate adjusted for a changed fact: one join each, for the aggregate and its twins (aggadjust.go)
	Due             int64 // bindings a clock move made due (deadline.go)
	Needless        int64 // tasks not queued, or not run, because a fact their binding names told they would find nothing (probe.go)
	// OwnKept counts calls whose changes held the last round's writes come
	// back, and took the results the round adjusted for them (aggown.go);
	// OwnLost those whose did not (a plan not committed, or not as planned).
	OwnKept, OwnLost int64
	// OwnBack counts the writes of a round that came back in the next
	// call's changes as the round left them, dispatched only to the sites
	// the round's own dispatch left out (ownback.go).
	OwnBack int64
}

// Evaluator evaluates one rule set. It is not safe for concurrent use: the
// engine runs one round at a time.
type Evaluator struct {
	rs            *rules.RuleSet
	seed          uint64
	rng           *rand.Rand
	clock         func() time.Time
	maxPasses     int
	maxFresh      int
	maxAggReads   int
	maxAbsent     int // WithMaxAbsentKeys
	maxDeps       int // WithMaxKeptReads
	maxGuarded    int
	maxAdjust     int
	maxFirings    int
	maxCost       uint64        // WithRoundBudget: CEL cost per round
	maxTime       time.Duration // WithRoundBudget: wall time per round
	carry         [][]task      // by rule index, the tasks a round left at its budget, as queues (queue.go)
	resume        int           // where in rs.Rules the next round's first pass starts: after the rule the last one was cut in
	yield         func() bool   // WithYield; nil: never
	back          *backWrites   // the last round's writes, to tell them when they come back (ownback.go)
	stop          func() bool   // WithStop; nil: never
	wholeAt       map[int]int   // by rule index: how far into its bindings a whole evaluation was when a budget cut it (body)
	pats          map[*rules.Pattern]*patInfo
	aggs          *aggregates   // aggregates and the results kept of them (aggregates.go)
	cands         candKeep      // choices' candidate lists kept across rounds (candkeep.go)
	values        valueCache    // decoded fact values (value.go)
	numbers       numberTexts   // the texts of the numbers aggregates came to (value.go)
	timed         []*rules.Rule // rules whose expressions read now, in order
	heads         map[*rules.Head]*rules.Pattern
	sites         map[*facts.FactType][]site
	labels        profileLabels     // what a CPU profile says the evaluating goroutine is doing (labels.go)
	noCandMemo    bool              // WithoutCandidateMemo
	noSharedJoins bool              // WithoutSharedJoins
	noKeepAtRest  bool              // WithoutKeepingAtRest
	noKeptCands   bool              // WithoutKeptCandidates
	noProbes      bool              // WithoutProbes
	noOwnBack     bool              // WithoutOwnBack
	waits         []*waitSet        // by rule index: bindings of hole-filling choices that found no candidate (waiting.go)
	probes        [][]probe         // by rule index: the facts a binding names that tell a task needless (probe.go)
	deadlines     []*deadlines      // by rule index: when bindings of a rule waiting for the clock are due (deadline.go); nil for other rules
	lazy          []bool            // by rule index: its condition is evaluated computing what it reads as it reads it (whenLazily)
	keyVars       []map[string]bool // by rule index: its body's path variables, what a carried binding keeps (body)
	stats         Stats
}

// New returns an evaluator of rs.
func New(rs *rules.RuleSet, opts ...Option) *Evaluator {
	e := &Evaluator{rs: rs, clock: time.Now, maxPasses: 16, wholeAt: map[int]int{}, maxFresh: 10000, maxAggReads: MaxAggregateReads, maxAbsent: maxAbsentKeys, maxDeps: maxDeps, maxGuarded: MaxGuardedReads, maxAdjust: -1,
		pats: map[*rules.Pattern]*patInfo{}, heads: map[*rules.Head]*rules.Pattern{}}
	e.aggs = newAggregates(e)
	e.values = valueCache{}
	for _, o := range opts {
		o(e)
	}
	e.rng = rand.New(rand.NewPCG(e.seed, e.seed^0x9e3779b97f4a7c15))
	e.waits = buildWaits(rs)
	e.deadlines = make([]*deadlines, len(rs.Rules))
	e.lazy = make([]bool, len(rs.Rules))
	e.keyVars = make([]map[string]bool, len(rs.Rules))
	for _, r := range rs.Rules {
		e.keyVars[r.Index] = bodyKeyVars(r)
		a, ok := deadlineAlias(r)
		if ok {
			e.deadlines[r.Index] = newDeadlines(r, a)
		}
		e.lazy[r.Index] = lazyWhen(r, ok)
	}
	for _, r := range rs.Rules {
		if readsNow(r) {
			e.timed = append(e.timed, r)
		}
	}
	for _, r := range rs.Rules {
		e.hint(r.Body)
		for _, ag := range r.Body.Aggregates {
			e.hint(ag.Body)
		}
		if r.Choose != nil {
			for _, ag := range r.Choose.Body.Aggregates {
				e.hint(ag.Body)
			}
		}
	}
	e.sites = buildSites(e, rs) // after the hints: alike joins have the same (sites.go)
	e.probes = e.buildProbes()  // after the hints and deadlines
	e.aggs.build(rs)            // after the hints: twins have the same (aggregates.go)
	return e
}

// hint records a scope's value hints on its patterns, when every value is
// one the value index holds (a short JSON string without escapes).
func (e *Evaluator) hint(sc *rules.Scope) {
	for _, p := range sc.Match {
		vals, ok := sc.Hints[p.Alias]
		if !ok {
			continue
		}
		indexable := true
		for _, v := range vals {
			if _, ok := facts.StringValue([]byte(strconv.Quote(v))); !ok || strconv.Quote(v) != `"`+v+`"` {
				indexable = false
			}
		}
		if indexable {
			e.info(p).hint = vals
		}
	}
}

// RuleSet returns the rule set the evaluator runs.
func (e *Evaluator) RuleSet() *rules.RuleSet { return e.rs }

// Stats returns the work counters.
func (e *Evaluator) Stats() Stats { return e.stats }

// Full evaluates every rule under every binding once: startup and reload.
func (e *Evaluator) Full(r facts.Reader) Plan {
	e.dropKept(r.Rev())
	e.carry, e.resume = nil, 0 // subsumed
	return e.run(r, func(rd *round) {
		for _, rule := range e.rs.Rules {
			rd.enqueue(rule, &binding{})
		}
	})
}

// Resync is Full without the round's bounds (WithMaxFirings,
// WithRoundBudget, WithYield): every firing one evaluation of everything
// makes, in one plan. The engine calls it at rest, when every change has
// been evaluated and committed: a correct incremental evaluation then left
// nothing to fire, so what the plan holds is what it missed (or, for the
// rules that read now, what fell due since the last tick). WithStop still
// cuts it, its work then lost, as a Full's is.
func (e *Evaluator) Resync(r facts.Reader) Plan {
	maxFirings, maxCost, maxTime, yield := e.maxFirings, e.maxCost, e.maxTime, e.yield
	e.maxFirings, e.maxCost, e.maxTime, e.yield = 0, 0, 0, nil
	defer func() { e.maxFirings, e.maxCost, e.maxTime, e.yield = maxFirings, maxCost, maxTime, yield }()
	return e.Full(r)
}

// Tick evaluates every binding of the rules whose expressions read now:
// time passing is not a fact change, so a guard such as
// `now - started > duration('1h')` becomes true without any change to
// trigger it. The engine calls Tick periodically; rules that do not read
// now are not evaluated. TimedRules lists them.
func (e *Evaluator) Tick(r facts.Reader) Plan {
	e.dropKept(r.Rev()) // not told what changed since the previous call
	return e.run(r, e.tick)
}

func (e *Evaluator) tick(rd *round) {
	for _, rule := range e.timed {
		rd.enqueue(rule, &binding{})
	}
}

// TimedRules returns the names of the rules that read now, which Tick evaluates.
func (e *Evaluator) TimedRules() []string {
	out := make([]string, len(e.timed))
	for i, r := range e.timed {
		out[i] = r.Name
	}
	return out
}

// Incremental evaluates only the bindings the changed facts affect: for each
// change, the patterns it matches (positive, optional, absent, aggregate
// and choice patterns, derive heads) give partial bindings, and each rule is
// evaluated under those alone. r must already reflect the changes. A
// change carries its CreateRevision and ModRevision as etcd reports them
// (they tell an update from a creation). For a batch that touches most
// facts (a relist after a compaction), Full is cheaper.
func (e *Evaluator) Incremental(r facts.Reader, changes []facts.Change) Plan {
	e.dropKept(r.Rev()) // not told what changed since the previous call
	return e.run(r, func(rd *round) {
		for _, c := range changes {
			rd.dispatch(c, nil)
		}
	})
}

// Continue is Incremental (and Tick too when tick is set) for a caller that
// passes every change: changes are all the changes after revision from up
// to r.Rev(), and from is the revision of the reader of the previous call.
// The evaluator then keeps aggregate results from one round to the next
// (aggstore.go): a change costs what it alters, not what its rules
// aggregate over.
func (e *Evaluator) Continue(from int64, r facts.Reader, changes []facts.Change, tick bool) Plan {
	e.aggs.follow(from, r, changes)
	if !e.noKeptCands {
		e.cands.follow(from, e.rs.Schema, changes)
	}
	back := e.back
	if back != nil && back.rev != from {
		back = nil
	}
	// The round's end (aggStore.keep) makes the store hold for r.Rev().
	return e.run(r, func(rd *round) {
		for _, c := range changes {
			if back != nil {
				if w, ok := back.back(c); ok && w.writer != nil {
					e.stats.OwnBack++
					rd.dispatchTo(c, nil, w.writer)
					continue
				}
			}
			rd.dispatch(c, nil)
		}
		if tick {
			e.tick(rd)
		}
	})
}

// dropKept forgets what the evaluator keeps from one round to the next
// (aggregate results, candidate lists): a call that is not told every
// change since the previous one, or nothing to keep at rest. The
// aggregates' store is then current as of rev.
func (e *Evaluator) dropKept(rev int64) {
	e.aggs.reset(rev)
	e.cands.reset()
}

// adjustLimit is the largest batch Continue adjusts kept results for: the
// WithMaxAdjust limit, or by default MaxAdjust or an eighth of the facts,
// whichever is more. Recomputing a dropped result costs its members, and
// members grow with the cluster while a batch's adjustments do not
// (BENCHMARKS.md, "Evaluator constants").
func (e *Evaluator) adjustLimit(r facts.Reader) int {
	if e.maxAdjust >= 0 {
		return e.maxAdjust
	}
	return max(MaxAdjust, r.Len()/8)
}

// errOscillation aborts a round in which a key returned to an earlier value.
var errOscillation = errors.New("oscillation")

// run evaluates a round to its local fixpoint. When rules oscillate, the
// round is evaluated again from the start without them.
func (e *Evaluator) run(r facts.Reader, seed func(*round)) Plan {
	e.stats.Rounds++
	e.back = nil
	stopped := map[string]bool{}
	var problems []Problem
	carried, resume := e.carry, e.resume
	for attempt := 0; ; attempt++ {
		e.carry = nil // an attempt redone for an oscillation carries nothing
		e.resume = resume
		rd := e.newRound(r, stopped)
		e.stats.WholeKept += int64(e.aggs.wholeKept())
		if attempt > 0 {
			e.loseWaits(nil) // the first attempt's bookkeeping is not the plan's
			e.loseDeadlines()
		}
		rd.install(carried)
		e.labels.phase("dispatch")
		seed(rd)
		rd.loop()
		if e.noKeepAtRest && len(rd.plan.Firings) == 0 && len(e.carry) == 0 && len(rd.osc) == 0 {
			e.dropKept(-1) // at rest: nothing kept for a next round
		} else {
			e.labels.phase("keep")
			e.aggs.end(r, rd.aggs)
		}
		e.labels.clear()
		problems = append(problems, rd.plan.Problems...)
		e.cands.rev = r.Rev()
		if len(rd.osc) == 0 || attempt > len(e.rs.Rules) {
			rd.plan.Problems = dedupProblems(problems)
			if !e.noOwnBack {
				e.back = backOf(r, rd)
			}
			return *rd.plan
		}
		for _, n := range rd.osc {
			stopped[n] = true
		}
	}
}

func dedupProblems(ps []Problem) []Problem {
	seen := map[string]bool{}
	var out []Problem
	for _, p := range ps {
		k := p.Rule + "\x00" + p.Err.Error()
		if !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	return out
}

type task struct {
	r   *rules.Rule
	b   *binding
	key string // b.key(), set when queued: the order a pass runs them in
	// rest: a binding of a whole evaluation the round's bound cut. It
	// keeps the budget it had as part of that one task: the rule's own
	// budget does not stop it, only the round's.
	rest bool
}

// round is the state of one evaluation round.
type round struct {
	e          *Evaluator
	ov         *overlay
	plan       *Plan
	now        ref.Val
	activation activation     // what eval hands CEL, reused
	lazyBody   lazyAggregates // what whenLazily computes, reused
	lazyAct    activation     // what whenLazily hands CEL, reused
	one        [1]*sol        // a choice's one pick, returned without allocating
	// barrier is set while the firings of a binding that read a guarded
	// aggregate over MaxGuardedReads member facts are made: they commit
	// only after every earlier firing of the plan (Firing.AfterAll).
	barrier  bool
	queue    [][]task          // pending tasks by rule index
	sorted   []int             // by rule index: the first of queue's tasks, carried, in key order (queue.go)
	queued   []map[string]bool // binding keys in queue after the sorted ones, by rule index
	fresh    []int             // tasks queued by this round's changes, not carried, by rule index (coalescing)
	stopped  map[string]bool   // rules skipped for the rest of the round
	history  map[string][]string
	writers  map[string][]string
	drawn    map[string]bool
	cur      *rules.Rule
	rejIdx   map[string]int
	candMemo map[*rules.Scope]map[string]candEntry // choices' candidates (candidates.go)
	// What choices' candidates came to, by choice and candidate list, at
	// each candidate's place (candmemo.go).
	candOutcomes map[candKey][][]*candOutcome
	outerSigs    map[string]*outerSig // the outcomes' outer reads, shared (internOuter)
	outerKey     []byte
	aggs         *roundAggs      // the aggregate results the round holds (aggregates.go)
	osc          []string        // rules found oscillating: the round is redone without them
	returns      map[string]int  // by key: how often it came back to an earlier value (commit)
	oscillated   map[string]bool // rules stopped for this round as a cycle: their tasks are parked
	parked       []task          // tasks of rules stopped for oscillating: evaluated again next call
	leftover     []task          // bindings of a task cut at the firing budget (body)
	onSkip       func(s *sol)    // set by a view's task: a binding its data broke is skipped (body)
	cost         uint64          // CEL cost the round has spent (WithRoundBudget)
	// tasksTime and tasksCost are what the round's finished tasks spent,
	// running is set while one runs (from taskStart, taskCost): the
	// round's bound is what its rules spent, not the setup before them
	// (WithRoundBudget).
	tasksTime time.Duration
	tasksCost uint64
	running   bool
	// What each rule spent of its budget this round, by rule index, the
	// task running aside (begun at taskStart, with the round at taskCost);
	// over: spent, its tasks wait for the next call (WithRoundBudget).
	ruleTime  []time.Duration
	ruleCost  []uint64
	over      []bool
	taskStart time.Time
	taskCost  uint64
	dispatchB *binding     // the binding dispatch matches a changed key into (scratch)
	joined    []liftJoined // what the change being dispatched found by each join (sites.go)
	found     foundArena   // the bindings in joined
	parts     []string     // the changed key dispatch matches, split (scratch)
	decoded   int          // the changed value dispatch decoded: 0 not yet, 1 into decodedV, -1 it does not decode
	decodedV  val
	keyBuf    []byte     // the task key enqueueKept looks up
	probeBuf  []byte     // the key needless looks up
	spares    []*binding // working bindings handed back (borrow)
	readBufs  [][]Read   // join reads handed back (borrowReads)
}

func (e *Evaluator) newRound(r facts.Reader, stopped map[string]bool) *round {
	n := len(e.rs.Rules)
	ov := newOverlay(r, e.rs.Schema)
	ov.maxAbsent = e.maxAbsent
	rd := &round{e: e, ov: ov,
		plan:    &Plan{RuleSetVersion: e.rs.Version, Rev: r.Rev()},
		now:     types.Timestamp{Time: e.clock().UTC()},
		queue:   make([][]task, n),
		queued:  make([]map[string]bool, n),
		sorted:  make([]int, n),
		fresh:   make([]int, n),
		stopped: map[string]bool{}, history: map[string][]string{}, writers: map[string][]string{},
		drawn: map[string]bool{}, rejIdx: map[string]int{}, returns: map[string]int{}, oscillated: map[string]bool{},
		taskStart: time.Now(),
		ruleTime:  make([]time.Duration, n), ruleCost: make([]uint64, n), over: make([]bool, n)}
	rd.aggs = e.aggs.begin(rd)
	for i := range rd.queued {
		rd.queued[i] = map[string]bool{}
	}
	for name := range stopped {
		rd.stopped[name] = true // reported when its oscillation was found
		rd.oscillated[name] = true
	}
	return rd
}

// enqueue adds a task; an empty binding (everything) subsumes the others.
func (rd *round) enqueue(r *rules.Rule, b *binding) { rd.push(task{r: r, b: b}, true) }

// push queues t; fresh says it comes from this round's changes, so that
// it counts towards a burst (coalescing), rather than being a task an
// earlier round or budget left, queued again as it was.
func (rd *round) push(t task, fresh bool) {
	r, b := t.r, t.b
	if rd.stopped[r.Name] {
		if rd.oscillated[r.Name] {
			rd.parked = append(rd.parked, t) // tried again next call
		}
		return
	}
	i := r.Index
	if rd.queued[i][""] {
		return
	}
	if rd.needless(r, b) {
		return // probe.go: nothing to do under b
	}
	k := t.key // a task queued before (carried, requeued) has its key
	if k == "" {
		k = b.key()
	}
	if k == "" {
		rd.queue[i], rd.sorted[i] = nil, 0 // not [:0]: a carried queue is not written (settle)
		clear(rd.queued[i])
	}
	if rd.queued[i][k] || rd.carriedHas(i, k) {
		return
	}
	rd.queued[i][k] = true
	t.key = k
	rd.queue[i] = append(rd.queue[i], t)
	if !fresh || rd.e.waits[i] == nil {
		return
	}
	// A burst of this round's changes is evaluated whole (waiting.go);
	// the bindings a cut round left are not a burst: each is known, and
	// evaluating the rule whole again would solve every binding it has
	// to reach them.
	if rd.fresh[i]++; rd.fresh[i] > coalesceAt && rd.fresh[i] > rd.wholeCost(r)/wholePerTask {
		rd.enqueue(r, &binding{})
	}
}

// requeue queues tasks an earlier round or budget left, as they were.
func (rd *round) requeue(ts []task) {
	for _, t := range ts {
		rd.push(t, false)
	}
}

// enqueueKept is enqueue(r, b.restrict(keep)), without building the
// restricted binding when its task is queued already: a burst of writes
// reaches the same task from many sites.
func (rd *round) enqueueKept(r *rules.Rule, b *binding, keep func(string) bool) {
	if rd.oscillated[r.Name] {
		rd.enqueue(r, b.restrict(keep))
		return
	}
	if rd.stopped[r.Name] || rd.queued[r.Index][""] {
		return
	}
	rd.keyBuf = b.appendKey(rd.keyBuf[:0], keep)
	if len(rd.keyBuf) > 0 && (rd.queued[r.Index][string(rd.keyBuf)] || rd.carriedHas(r.Index, string(rd.keyBuf)) || rd.needlessKept(r, b, keep)) {
		return
	}
	rd.enqueue(r, b.restrict(keep))
}

// loop runs passes over the rules in stratified order until no task is
// left: a rule sees the writes of the rules it depends on from the same
// pass. Tasks a pass creates run in the next one, so the passes bound it.
func (rd *round) loop() {
	all := rd.e.rs.Rules
	// After a round cut at its budget, the first pass starts with the
	// rules after the one it was cut in: scheduling 100,000 instances a
	// slice at a time must not keep every later rule (endpoints, a failed
	// node's replacements) waiting until the last slice.
	order := all
	if k := rd.e.resume; k > 0 {
		order = slices.Concat(all[k:], all[:k])
		rd.e.resume = 0
	}
	for pass := 0; pass < rd.e.maxPasses; pass++ {
		ran := false
		if pass > 0 {
			order = all
		}
		for _, r := range order {
			if len(rd.queue[r.Index]) == 0 {
				continue
			}
			ts := rd.take(r.Index)
			for i, t := range ts {
				if rd.stopped[r.Name] {
					if rd.oscillated[r.Name] {
						rd.parked = append(rd.parked, ts[i:]...) // not dropped: the next call tries them again
					}
					break
				}
				if rd.needless(r, t.b) {
					continue // probe.go: its hole was filled since it was queued (or carried), say
				}
				ran = true
				rd.taskStart, rd.taskCost, rd.running = time.Now(), rd.cost, true
				err := rd.runTask(t)
				took := time.Since(rd.taskStart)
				rd.ruleTime[r.Index] += took
				rd.tasksTime += took
				rd.running = false
				rd.ruleCost[r.Index] += rd.cost - rd.taskCost
				rd.tasksCost += rd.cost - rd.taskCost
				if err != nil {
					if errors.Is(err, errOscillation) {
						return
					}
					rd.problem(r.Name, err)
				}
				if rd.atBudget() {
					rd.carryRest(ts[i+1:])
					rd.e.resume = (r.Index + 1) % len(all)
					return
				}
				if !t.rest && rd.ruleOver(r) {
					rd.over[r.Index] = true
					rd.leftover = append(rd.leftover, ts[i+1:]...)
					break
				}
			}
		}
		if !ran {
			if !rd.refill() {
				rd.carryOver()
				return
			}
			pass = -1 // a fresh budget, fresh passes
		}
	}
	rd.carryOver()
	for _, r := range rd.e.rs.Rules {
		if len(rd.queue[r.Index]) > 0 {
			rd.problem(r.Name, fmt.Errorf("no fixpoint after %d passes: its bindings keep changing; stopped for this round", rd.e.maxPasses))
		}
	}
}

// roundBudgets is how many rules' budgets (WithRoundBudget) a whole round
// may spend: many costly rules end it as one rule's budget ends that rule.
const roundBudgets = 4

// atBudget reports whether the round has spent a budget: its plan holds
// its firings, or its rules' tasks roundBudgets times a rule's cost or
// time; or whether its caller stops it (WithStop). The time is the tasks'
// own: a round's setup (requeueing what the last one carried, dispatching
// its changes) is no rule's. Counted from the round's start, a setup
// longer than the bound (at 100,000 instances on a loaded machine) ended
// every round after its first task, and rules late in the rotation waited
// minutes for their turn: services' instances were created one service
// every few minutes.
func (rd *round) atBudget() bool {
	e := rd.e
	if (e.maxFirings > 0 && len(rd.plan.Firings) >= e.maxFirings) || (e.stop != nil && e.stop()) {
		return true
	}
	took, cost := rd.spent()
	return (e.maxCost > 0 && cost >= roundBudgets*e.maxCost) || (e.maxTime > 0 && took >= roundBudgets*e.maxTime)
}

// spent is what the round's tasks have spent, the one running included.
func (rd *round) spent() (time.Duration, uint64) {
	if rd.running {
		return rd.tasksTime + time.Since(rd.taskStart), rd.tasksCost + (rd.cost - rd.taskCost)
	}
	return rd.tasksTime, rd.tasksCost
}

// ruleOver reports whether r has spent its budget of the round, the task
// running included.
func (rd *round) ruleOver(r *rules.Rule) bool {
	e := rd.e
	if e.maxCost > 0 && rd.ruleCost[r.Index]+(rd.cost-rd.taskCost) >= e.maxCost {
		return true
	}
	return e.maxTime > 0 && rd.ruleTime[r.Index]+time.Since(rd.taskStart) >= e.maxTime
}

// refill gives the rules that spent their budget another one once no rule
// within budget has work left, while the round has budget of its own: a
// rule's budget keeps one costly rule from starving the others, not from
// using a round they leave idle. It reports whether it had tasks to give.
func (rd *round) refill() bool {
	if len(rd.leftover) == 0 || rd.atBudget() || (rd.e.yield != nil && rd.e.yield()) {
		return false
	}
	left := rd.leftover
	rd.leftover = nil
	clear(rd.over)
	clear(rd.ruleTime)
	clear(rd.ruleCost)
	rd.requeue(left)
	return true
}

// carryOver ends a round in which rules spent their budget: their tasks
// not yet run go to the next call.
func (rd *round) carryOver() {
	rd.carry(rd.leftover, func(i int) bool { return rd.over[i] })
}

// carryRest ends a round at its firing budget: the current rule's tasks
// not yet run (rest) and every queued task go to the next call, in the
// order this round would have run them.
func (rd *round) carryRest(rest []task) {
	rd.carry(append(rd.leftover, rest...), func(int) bool { return true })
}

// runTask evaluates one rule under one partial binding. A panic is
// recovered and reported with the rule's name.
func (rd *round) runTask(t task) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, firstLines(string(debug.Stack()), 12))
		}
	}()
	rd.e.stats.Tasks++
	rd.e.labels.rule(t.r)
	defer rd.e.labels.phase("dispatch")
	if t.b.len() == 0 {
		rd.wholeTask(t.r, false, nil)
		defer func() { rd.wholeTask(t.r, true, err) }()
	}
	if t.r.Derives() {
		return rd.derive(t.r, t.b)
	}
	return rd.act(t.r, t.b)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func (rd *round) problem(rule string, err error) {
	rd.plan.Problems = append(rd.plan.Problems, Problem{Rule: rule, Err: err})
	rd.stopped[rule] = true
	if r, ok := rd.e.rs.Rule(rule); ok {
		rd.e.loseWaits(r)
		if dl := rd.e.deadlines[r.Index]; dl != nil {
			dl.whole = true // its tasks left in the round are dropped
		}
	}
}

func (rd *round) reject(r Rejection) {
	var k strings.Builder
	k.WriteString(r.Rule)
	for _, m := range []map[string]string{r.Bindings, r.Candidate} {
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			k.WriteString("\x00" + n + "=" + m[n])
		}
		k.WriteString("\x01")
	}
	if i, ok := rd.rejIdx[k.String()]; ok {
		rd.plan.Rejections[i] = r
		return
	}
	rd.rejIdx[k.String()] = len(rd.plan.Rejections)
	rd.plan.Rejections = append(rd.plan.Rejections, r)
}

const absentMark = "\x00absent"

// maxReturns is how often a key may come back to an earlier value within
// one round before the rules writing it are taken for a cycle.
const maxReturns = 3

// commit adds a firing to the plan, applies its writes to the overlay and
// dispatches them as changes. A key that returns to a value it held earlier
// in the round is an oscillation: the rules that wrote it are stopped.
func (rd *round) commit(f Firing) error {
	for _, w := range f.Writes {
		h, ok := rd.history[w.Key]
		if !ok {
			base := absentMark
			if bf, ok := rd.ov.base.Get(w.Key); ok {
				base = string(bf.Value)
			}
			h = []string{base}
		}
		nv := absentMark
		if w.Value != nil {
			nv = string(w.Value)
		}
		for _, old := range h {
			if old != nv {
				continue
			}
			// A key may come back to a value it held because its inputs
			// changed in the round (an endpoint derived, then withdrawn
			// when another rule stops its instance): only one that keeps
			// coming back is a cycle.
			if rd.returns[w.Key]++; rd.returns[w.Key] > maxReturns {
				names := append([]string{f.Rule}, rd.writers[w.Key]...)
				sort.Strings(names)
				names = uniq(names)
				rd.osc = names
				for _, n := range names {
					rd.plan.Problems = append(rd.plan.Problems, Problem{Rule: n, Err: fmt.Errorf(
						"oscillation: %s returned to an earlier value %d times within one round (rules %s); stopped for this round, evaluated again in the next",
						w.Key, rd.returns[w.Key], strings.Join(names, ", "))})
				}
				return errOscillation
			}
			break
		}
		rd.history[w.Key] = append(h, nv)
	}
	rd.plan.Firings = append(rd.plan.Firings, f)
	rd.e.stats.Firings++
	existed := make([]bool, len(f.Writes))
	for i, w := range f.Writes {
		_, existed[i], _ = rd.ov.get(w.Key)
	}
	for _, w := range f.Writes {
		// A fact that breaks the schema was absent for every rule and
		// aggregate: writing over it creates the key, as they saw it.
		if old, ok, _ := rd.ov.get(w.Key); ok && old.Invalid == "" {
			rd.aggs.changed(w.Key, old.Value, -1)
		} else {
			rd.aggs.changed(w.Key, nil, -1)
		}
		rd.ov.put(w.Key, w.Value)
		rd.aggs.changed(w.Key, w.Value, +1)
		rd.writers[w.Key] = append(rd.writers[w.Key], f.Rule)
	}
	r, _ := rd.e.rs.Rule(f.Rule)
	for i, w := range f.Writes {
		c := facts.Change{Fact: facts.Fact{Key: w.Key, Value: w.Value}, Deleted: w.Value == nil}
		c.CreateRevision = createdMark
		if existed[i] {
			c.CreateRevision = updatedMark
		}
		rd.dispatch(c, r)
	}
	return nil
}

func uniq(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
