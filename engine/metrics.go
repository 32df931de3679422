package engine

import (
	"maps"
	"sync"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
)

// Stats are the engine's counters since it started. They are plain numbers
// so that any metrics system can export them.
type Stats struct {
	Leading        bool             // this engine holds the election now
	Terms          int64            // times it became leader
	Rounds         int64            // evaluations, full ones included
	FullRounds     int64            // evaluations of everything (startup, swap, give-up), resyncs aside
	TickRounds     int64            // evaluations of the rules that read the clock
	Firings        int64            // firings committed
	FiringsByRule  map[string]int64 // firings committed, by rule
	PlanFirings    int64            // firings planned (committed or not)
	PlanWrites     int64            // writes planned
	MaxPlanWrites  int              // largest plan seen, in writes
	Txns           int64            // transactions committed
	KeysWritten    int64            // puts and deletes committed, records excluded
	Conflicts      int64            // transactions whose compares failed
	Reevaluated    int64            // firings dropped as stale and evaluated again
	GaveUp         int64            // plans abandoned after RetryLimit conflicts
	Unavailable    int64            // attempts that failed because etcd did not answer
	Rejected       int64            // firings that cannot be committed (too large, invalid)
	Problems       int64            // rule problems reported by the evaluator
	ProblemsByRule map[string]int64 // the same, by rule
	CommitTime     time.Duration    // total time spent in successful commits
	// Where a leader's time goes, round by round: evaluating (on the
	// mirror's view), applying plans (commits with their conflicts and
	// retries), and waiting for its own writes to come back through the
	// watch before the next evaluation. The rest is waiting for changes.
	// ApplyTime counts only the time the round loop waited for a commit;
	// ApplyOverlapTime is commit time the next round's evaluation overlapped.
	EvalTime, ApplyTime, WatchWaitTime time.Duration
	ApplyOverlapTime                   time.Duration
	MaxCommitTime                      time.Duration // slowest successful commit
	EventsPruned                       int64         // firing records deleted by retention
	RejectionRecords                   int64         // records of choices that placed nothing
	InvalidRecords                     int64         // records of facts that break the schema (KindInvalid)
	LastRev                            int64         // revision of the last commit
	SettledRev                         int64         // every change up to this revision is evaluated and its plan committed
	RuleSetVersion                     string        // version of the evaluator in use
	// Work is what the evaluators did in the rounds, summed over every
	// evaluator this engine used (a reload starts a new one).
	Work Work
	// Resyncs at rest (Config.ResyncInterval): rounds, and the firings
	// they planned that the incremental rounds had missed (the rules that
	// read now aside: time, not a change, makes theirs due), by rule.
	ResyncRounds        int64
	ResyncFirings       int64
	ResyncFiringsByRule map[string]int64
}

// metrics accumulates Stats; mu guards s.
type metrics struct {
	mu sync.Mutex
	s  Stats
}

func newMetrics() *metrics {
	return &metrics{s: Stats{FiringsByRule: map[string]int64{}, ProblemsByRule: map[string]int64{}, ResyncFiringsByRule: map[string]int64{}}}
}

func (m *metrics) update(fn func(s *Stats)) {
	m.mu.Lock()
	fn(&m.s)
	m.mu.Unlock()
}

func (m *metrics) snapshot() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.s
	s.FiringsByRule = maps.Clone(m.s.FiringsByRule)
	s.ProblemsByRule = maps.Clone(m.s.ProblemsByRule)
	s.ResyncFiringsByRule = maps.Clone(m.s.ResyncFiringsByRule)
	return s
}

func (m *metrics) committed(chunk []*staged, rev int64, took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.s.Txns++
	m.s.CommitTime += took
	m.s.MaxCommitTime = max(m.s.MaxCommitTime, took)
	m.s.LastRev = max(m.s.LastRev, rev)
	for _, st := range chunk {
		m.s.Firings++
		m.s.FiringsByRule[st.f.Rule]++
		m.s.KeysWritten += int64(len(st.f.Writes))
	}
}

// Work counts an evaluator's work (eval.Stats): what a round costs
// besides its time, comparable between runs and presets where time is not.
type Work struct {
	Tasks         int64 // (rule, partial binding) evaluations
	Evals         int64 // CEL evaluations
	FactsVisited  int64 // facts joins looked at
	Aggregates    int64 // aggregate groups computed
	AggregateHits int64 // aggregate groups served from a round's cache or the store
	Adjustments   int64 // kept aggregate results adjusted for a changed fact, a join each
	// CandidatesReused counts choice candidates whose outcome a round
	// served again, their aggregates unchanged, instead of evaluating them.
	CandidatesReused int64
	// Needless counts tasks not run because a fact their binding names
	// showed they could not fire (a match fact missing, an absent one
	// there): the changes that reach rules they cannot concern.
	Needless int64
	// WritesBack counts the engine's own writes that came back from the
	// mirror as its round left them, dispatched only to the sites that
	// round left out (eval.Stats.OwnBack).
	WritesBack int64
}

// workOf is the part of an evaluator's counters Work holds.
func workOf(s eval.Stats) Work {
	return Work{Tasks: s.Tasks, Evals: s.Evals, FactsVisited: s.FactsVisited,
		Aggregates: s.Aggregates, AggregateHits: s.AggregateHits, Adjustments: s.Adjustments, CandidatesReused: s.CandidatesReused, Needless: s.Needless, WritesBack: s.OwnBack}
}

// counts are w's fields, in the order of WorkKinds.
func (w *Work) counts() [9]*int64 {
	return [9]*int64{&w.Tasks, &w.Evals, &w.FactsVisited, &w.Aggregates, &w.AggregateHits, &w.Adjustments, &w.CandidatesReused, &w.Needless, &w.WritesBack}
}

// WorkKinds name Work's counts as the metrics and the bench report them.
var WorkKinds = [9]string{"tasks", "cel_evaluations", "facts_visited", "aggregates_computed", "aggregate_hits", "aggregate_adjustments", "candidates_reused", "tasks_needless", "writes_come_back"}

// ByKind returns w's counts by their WorkKinds.
func (w Work) ByKind() map[string]int64 {
	out := make(map[string]int64, len(WorkKinds))
	for i, c := range w.counts() {
		out[WorkKinds[i]] = *c
	}
	return out
}

// Sub returns w - o, count by count.
func (w Work) Sub(o Work) Work { return w.plus(o, -1) }

// add returns w + o, count by count.
func (w Work) add(o Work) Work { return w.plus(o, 1) }

func (w Work) plus(o Work, sign int64) Work {
	oc := o.counts()
	for i, c := range w.counts() {
		*c += sign * *oc[i]
	}
	return w
}
