package promexport

import (
	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/facts"
	"github.com/prometheus/client_golang/prometheus"
)

// Sources are the functions a Collector reads at each scrape; nil ones are
// left out (a server with --no-engine has only a mirror).
type Sources struct {
	Engine func() engine.Stats
	Mirror func() (facts.MirrorStats, int)
	Reload func() reload.Status
	// Compact is the etcd compactor's (nil: the server compacts nothing).
	Compact func() engine.CompactStats
}

// Collector is a prometheus.Collector over Sources.
type Collector struct {
	src Sources
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a collector of src.
func New(src Sources) *Collector { return &Collector{src: src} }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("ccattler_"+name, help, labels, nil)
}

var (
	dLeading       = desc("engine_leading", "1 while this server's engine holds the election.")
	dTerms         = desc("engine_terms_total", "Times this engine became leader.")
	dRounds        = desc("engine_rounds_total", "Evaluation rounds, full ones included.")
	dFullRounds    = desc("engine_full_rounds_total", "Rounds that evaluated everything (start, rule-set swap, give-up), resyncs aside.")
	dResyncRounds  = desc("engine_resync_rounds_total", "Full evaluations at rest (--resync-every) that commit what the incremental rounds missed.")
	dResyncFirings = desc("engine_resync_firings_total", "Firings a resync at rest planned that the incremental rounds had missed, by rule: 0 while evaluation is exact.", "rule")
	dTickRounds    = desc("engine_tick_rounds_total", "Rounds that evaluated the rules reading the clock.")
	dFirings       = desc("engine_firings_total", "Rule firings committed, by rule.", "rule")
	dPlanFirings   = desc("engine_plan_firings_total", "Firings planned, committed or not.")
	dPlanWrites    = desc("engine_plan_writes_total", "Writes planned.")
	dMaxPlan       = desc("engine_plan_writes_max", "Writes of the largest plan seen.")
	dTxns          = desc("engine_txns_total", "Transactions committed.")
	dKeys          = desc("engine_keys_written_total", "Puts and deletes committed, firing records excluded.")
	dConflicts     = desc("engine_txn_conflicts_total", "Transactions whose compares failed (a fact changed after it was read).")
	dReevaluated   = desc("engine_reevaluated_total", "Firings dropped as stale and evaluated again.")
	dGaveUp        = desc("engine_gave_up_total", "Plans abandoned after the retry limit.")
	dUnavailable   = desc("engine_unavailable_total", "Commit attempts that failed because etcd did not answer.")
	dRejected      = desc("engine_rejected_firings_total", "Firings that could not be committed (too large, invalid).")
	dProblems      = desc("engine_problems_total", "Rule problems (budget, runtime error, oscillation), by rule.", "rule")
	dEvalSeconds   = desc("engine_evaluate_seconds_total", "Time rounds spent evaluating rules.")
	dWork          = desc("engine_work_total", "What the evaluator did, counted: tasks (rule, partial binding), CEL evaluations, facts visited by joins, aggregate groups computed, served kept, and kept ones adjusted to a changed fact, choice candidates served again unchanged.", "kind")
	dCommit        = desc("engine_commit_duration_seconds", "Time of successful commits (count: transactions).")
	dCommitMax     = desc("engine_commit_duration_seconds_max", "Slowest successful commit.")
	dPruned        = desc("engine_events_pruned_total", "Firing records deleted by retention.")
	dRejections    = desc("engine_rejection_records_total", "Records of choices that placed nothing.")
	dInvalid       = desc("engine_invalid_fact_records_total", "Records of facts that break the schema (event kind invalid); rules treat those facts as absent.")
	dLastRev       = desc("engine_last_commit_revision", "etcd revision of the engine's last commit.")
	dSettledRev    = desc("engine_settled_revision", "Every change up to this revision is evaluated and its plan committed.")
	dMirrorFacts   = desc("mirror_facts", "Facts in the in-memory mirror.")
	dMirrorEvents  = desc("mirror_events_total", "Watch events the mirror applied.")
	dMirrorRelists = desc("mirror_relists_total", "Full relists of the mirror, the first included.")
	dMirrorUntyped = desc("mirror_untyped_facts", "Facts whose key matches no fact type.")
	dMirrorInvalid = desc("mirror_invalid_facts", "Facts that break the schema (a bad key or value, a lease key on no etcd lease), untyped ones included: rules treat them as absent.")
	dRuleSet       = desc("ruleset_info", "The running rule set: 1 for its version.", "version", "source")
	dLoaded        = desc("ruleset_loaded_timestamp_seconds", "When the running rule set was loaded (Unix time).")
	dRuleCount     = desc("ruleset_rules", "Rules in the running rule set.")
	dReloads       = desc("ruleset_reloads_total", "Reloads that replaced the rule set.")
	dReloadFails   = desc("ruleset_reload_failures_total", "Reloads rejected for errors in the rule files.")
	dCompactions   = desc("etcd_compactions_total", "Compactions of etcd's history this server made while leading (--compact-every).")
	dCompactFails  = desc("etcd_compaction_failures_total", "Compactions of etcd's history that failed (tried again an interval later).")
	dSpaceRecover  = desc("etcd_space_recoveries_total", "Times etcd was found out of space (NOSPACE alarm) after a compaction, and defragmented and disarmed.")
	dCompactRev    = desc("etcd_compact_revision", "Revision of this server's last compaction: etcd's history before it is gone.")
	dCompactTime   = desc("etcd_compaction_duration_seconds", "Time of the compactions (count: compactions).")
)

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dLeading, dTerms, dRounds, dFullRounds, dResyncRounds, dResyncFirings, dTickRounds, dFirings, dPlanFirings, dPlanWrites,
		dMaxPlan, dTxns, dKeys, dConflicts, dReevaluated, dGaveUp, dUnavailable, dRejected, dProblems, dEvalSeconds, dWork, dCommit,
		dCommitMax, dPruned, dRejections, dInvalid, dLastRev, dSettledRev, dMirrorFacts, dMirrorEvents, dMirrorRelists,
		dMirrorUntyped, dMirrorInvalid, dRuleSet, dLoaded, dRuleCount, dReloads, dReloadFails,
		dCompactions, dCompactFails, dSpaceRecover, dCompactRev, dCompactTime} {
		ch <- d
	}
}

// Collect reads the sources once and sends their values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if c.src.Engine != nil {
		s := c.src.Engine()
		gauge(dLeading, b2f(s.Leading))
		counter(dTerms, float64(s.Terms))
		counter(dRounds, float64(s.Rounds))
		counter(dFullRounds, float64(s.FullRounds))
		counter(dTickRounds, float64(s.TickRounds))
		counter(dResyncRounds, float64(s.ResyncRounds))
		for rule, n := range s.ResyncFiringsByRule {
			counter(dResyncFirings, float64(n), rule)
		}
		for rule, n := range s.FiringsByRule {
			counter(dFirings, float64(n), rule)
		}
		counter(dPlanFirings, float64(s.PlanFirings))
		counter(dPlanWrites, float64(s.PlanWrites))
		gauge(dMaxPlan, float64(s.MaxPlanWrites))
		counter(dTxns, float64(s.Txns))
		counter(dEvalSeconds, s.EvalTime.Seconds())
		for kind, n := range s.Work.ByKind() {
			counter(dWork, float64(n), kind)
		}
		counter(dKeys, float64(s.KeysWritten))
		counter(dConflicts, float64(s.Conflicts))
		counter(dReevaluated, float64(s.Reevaluated))
		counter(dGaveUp, float64(s.GaveUp))
		counter(dUnavailable, float64(s.Unavailable))
		counter(dRejected, float64(s.Rejected))
		for rule, n := range s.ProblemsByRule {
			counter(dProblems, float64(n), rule)
		}
		ch <- prometheus.MustNewConstSummary(dCommit, uint64(s.Txns), s.CommitTime.Seconds(), nil)
		gauge(dCommitMax, s.MaxCommitTime.Seconds())
		counter(dPruned, float64(s.EventsPruned))
		counter(dRejections, float64(s.RejectionRecords))
		counter(dInvalid, float64(s.InvalidRecords))
		gauge(dLastRev, float64(s.LastRev))
		gauge(dSettledRev, float64(s.SettledRev))
	}
	if c.src.Mirror != nil {
		st, n := c.src.Mirror()
		gauge(dMirrorFacts, float64(n))
		counter(dMirrorEvents, float64(st.Events))
		counter(dMirrorRelists, float64(st.Relists))
		gauge(dMirrorUntyped, float64(st.Untyped))
		gauge(dMirrorInvalid, float64(st.Invalid))
	}
	if c.src.Reload != nil {
		st := c.src.Reload()
		gauge(dRuleSet, 1, st.Version, st.Source)
		gauge(dLoaded, float64(st.LoadedAt.UnixNano())/1e9)
		gauge(dRuleCount, float64(st.Rules))
		counter(dReloads, float64(st.Reloads))
		counter(dReloadFails, float64(st.Failures))
	}
	if c.src.Compact != nil {
		st := c.src.Compact()
		counter(dCompactions, float64(st.Compactions))
		counter(dSpaceRecover, float64(st.SpaceRecoveries))
		counter(dCompactFails, float64(st.Failures))
		gauge(dCompactRev, float64(st.Revision))
		ch <- prometheus.MustNewConstSummary(dCompactTime, uint64(st.Compactions), st.Time.Seconds(), nil)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
