package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// benchResult is what `ccattler bench` measured; -o json prints it as is.
// A phase that did not run leaves its fields zero.
type benchResult struct {
	Nodes     int `json:"nodes"`
	Instances int `json:"instances"`
	Services  int `json:"services"`
	CPUs      int `json:"cpus"`

	// Apply to converged.
	ConvergeSeconds    float64 `json:"converge_seconds"`
	InstancesPerSecond float64 `json:"instances_per_second"`
	// When a phase did not finish (--timeout, an interrupt): which, how
	// long it ran and, for the converge phase, how far it got.
	StoppedIn           string  `json:"stopped_in,omitempty"`
	StoppedAfterSeconds float64 `json:"stopped_after_seconds,omitempty"`
	ReadyAtStop         int     `json:"running_healthy_at_stop,omitempty"`
	EndpointsAtStop     int     `json:"endpoints_at_stop,omitempty"`
	// Where a phase that ran out of --timeout stood (bench_stall.go).
	Stall *stallReport `json:"stall,omitempty"`
	// The pace of the first and of the last tenth of the instances to run
	// healthy (instances/s): apply to a tenth running, and nine tenths to
	// all. A pace that falls as the nodes fill shows as last < first.
	PaceFirstTenth float64 `json:"pace_first_tenth"`
	PaceLastTenth  float64 `json:"pace_last_tenth"`
	// Each instance's way in stages, as the watch delivered the changes
	// (tracker.stages): where the converge waited.
	Stages []stageLatency `json:"stages,omitempty"`
	// How the scheduler spread the instances once converged (tracker.spread):
	// instances beyond an even spread of their service over the nodes, and
	// instances per node, fewest, most, and their coefficient of variation.
	// They tell what a cheaper scheduler (a smaller sample of candidates)
	// would cost in placement.
	SpreadExcessInstances int     `json:"spread_excess_instances"`
	NodeInstancesMin      int     `json:"node_instances_min"`
	NodeInstancesMax      int     `json:"node_instances_max"`
	NodeInstancesCV       float64 `json:"node_instances_cv"`
	// Where the engine's time went from the apply to convergence (or the
	// stop): evaluating, applying plans (commits, conflicts, retries),
	// waiting for its own writes to come back through the watch; idle is
	// the rest (waiting for changes). Applying counts the time the round
	// loop waited for a commit; ApplyOverlap is the commit time the next
	// round's evaluation overlapped. AgentCommitSeconds adds up the
	// agents' transactions (each agent's writer commits one at a time).
	EngineEvalSeconds         float64 `json:"engine_evaluate_seconds"`
	EngineApplySeconds        float64 `json:"engine_apply_seconds"`
	EngineApplyOverlapSeconds float64 `json:"engine_apply_overlap_seconds"`
	EngineWatchWaitSeconds    float64 `json:"engine_watch_wait_seconds"`
	EngineIdleSeconds         float64 `json:"engine_idle_seconds"`
	AgentCommitSeconds        float64 `json:"agent_commit_seconds"`
	// EngineWork is what the evaluator did to converge, counted rather
	// than timed: comparable across presets and runs where the machine's
	// speed drifts.
	// By engine.WorkKinds.
	EngineWork map[string]int64 `json:"engine_work"`
	// KeysWritten counts every put and delete under the root committed
	// between the apply and convergence: the apply, the engine's writes and
	// their firing records, the agents' reports and leases, the clock.
	KeysWritten       int64   `json:"keys_written"`
	KeysPerSecond     float64 `json:"keys_per_second"`
	Transactions      int64   `json:"transactions"` // revisions under the root in the same window
	EngineKeysWritten int64   `json:"engine_keys_written"`
	EngineFirings     int64   `json:"engine_firings"` // each committed with one record
	// EngineFiringsByRule is EngineFirings by rule: which rules the
	// engine's work went to (with the profile's labels, how costly each
	// firing was).
	EngineFiringsByRule map[string]int64 `json:"engine_firings_by_rule,omitempty"`
	EngineTxns          int64            `json:"engine_transactions"`
	EngineRounds        int64            `json:"engine_rounds"`
	// Rounds lays the converge out round by round: each round the engine
	// evaluated from the apply until convergence (those with nothing to
	// evaluate aside), what it planned and how long it took.
	Rounds            []benchRound `json:"rounds,omitempty"`
	RoundFirings      int          `json:"round_firings"`  // the engine's firing budget per round (0: none)
	OverlapCommit     bool         `json:"overlap_commit"` // whether every plan committed while the next round evaluated (--overlap-commit; a round cut at its budget always does)
	AgentCache        bool         `json:"agent_cache"`    // whether the simulated nodes kept their local caches (--agent-cache)
	Conflicts         int64        `json:"compare_conflicts"`
	AgentOps          int64        `json:"agent_keys_written"`
	AgentTxns         int64        `json:"agent_transactions"`
	CPUSeconds        float64      `json:"cpu_seconds"`
	CPUNote           string       `json:"cpu_note"`
	GCCPUSeconds      float64      `json:"gc_cpu_seconds"`       // the collector's part of cpu_seconds, as the runtime estimates it
	PeakHeapBytes     int64        `json:"peak_heap_bytes"`      // every object, garbage not yet collected included
	PeakLiveHeapBytes int64        `json:"peak_live_heap_bytes"` // the most a collection found live
	PeakRSSBytes      int64        `json:"peak_rss_bytes"`       // the whole run, measuring phases included
	// The same up to convergence, and what a collection finds live once
	// converged: the control plane's memory, the measurement's aside.
	ConvergePeakRSSBytes      int64 `json:"converge_peak_rss_bytes"`
	ConvergePeakLiveHeapBytes int64 `json:"converge_peak_live_heap_bytes"`
	ConvergedLiveHeapBytes    int64 `json:"converged_live_heap_bytes"`
	// What RSS is made of once converged (after a collection): anonymous
	// memory (the heap, stacks, the runtime's own), of it the goroutines'
	// stacks (a simulated node has three goroutines), and file pages
	// mapped (the binary, etcd's database). 0 without /proc.
	ConvergedRSSAnonBytes int64 `json:"converged_rss_anon_bytes"`
	ConvergedRSSFileBytes int64 `json:"converged_rss_file_bytes"`
	ConvergedStackBytes   int64 `json:"converged_stack_bytes"`
	ConvergedGoroutines   int64 `json:"converged_goroutines"`
	// The collector's settings in force (GOGC, GOMEMLIMIT; cmd/ccattler/gc.go):
	// the memory figures above are proportional to the first.
	GCPercent        int64   `json:"gc_percent"`
	MemoryLimitBytes int64   `json:"memory_limit_bytes"`
	Facts            int     `json:"facts"`
	BytesPerFact     float64 `json:"bytes_per_fact"`           // mirror table, beyond key and value bytes
	KVBytesPerFact   float64 `json:"key_value_bytes_per_fact"` // the key and value bytes themselves

	// Raw etcd baseline, same etcd, same run.
	RawEtcdKeysPerSecond float64 `json:"raw_etcd_keys_per_second"`
	RawBatch             int     `json:"raw_batch"`
	RatioToRaw           float64 `json:"ratio_to_raw"`

	// One-fact change to its endpoint write.
	Changes           int     `json:"changes"`
	ChangeP50MS       float64 `json:"change_p50_ms"` // from before the write's commit to the endpoint change in the mirror
	ChangeP99MS       float64 `json:"change_p99_ms"`
	ChangeMaxMS       float64 `json:"change_max_ms"`
	ChangeEngineP50MS float64 `json:"change_engine_p50_ms"` // from the change in the mirror to the endpoint change in the mirror
	ChangeEngineP99MS float64 `json:"change_engine_p99_ms"`
	// The flip's own write, a one-key transaction from the process's
	// agent client: etcd's commit latency, the floor under both figures.
	ChangeWriteP50MS float64 `json:"change_write_p50_ms"`
	ChangeWriteP99MS float64 `json:"change_write_p99_ms"`
	// Where the engine's part goes, per flip on average (engine.Stats over
	// the phase divided by the flips): evaluating, committing its plans, and
	// waiting for its writes through the watch; of applying, the time in
	// etcd's answer to its transactions; and its transactions.
	ChangeEngineEvalMS      float64 `json:"change_engine_evaluate_ms"`
	ChangeEngineApplyMS     float64 `json:"change_engine_apply_ms"`
	ChangeEngineCommitMS    float64 `json:"change_engine_commit_ms"`
	ChangeEngineWatchWaitMS float64 `json:"change_engine_watch_wait_ms"`
	ChangeEngineTxns        int64   `json:"change_engine_transactions"`
	// What the engine did during the change phase: its rounds and firings
	// by rule (the flips' own and any other work, such as the clock's).
	ChangeEngineRounds  int64            `json:"change_engine_rounds"`
	ChangeFiringsByRule map[string]int64 `json:"change_firings_by_rule,omitempty"`

	// Failure recovery.
	KilledNodes     int     `json:"killed_nodes"`
	LostInstances   int     `json:"lost_instances"`
	RecoverySeconds float64 `json:"recovery_seconds"` // lease expiry to replacements running and endpoints updated, grace included
	// GraceSeconds is lease expiry to every killed node marked unreachable:
	// the failure policy's 12s grace plus up to a second of clock.
	GraceSeconds              float64 `json:"grace_seconds"`
	RecoveryAfterGraceSeconds float64 `json:"recovery_after_grace_seconds"` // unreachable to replacements running and endpoints updated

	// Removals (--scale-to, --delete); absent when not run.
	ScaleDown *shrinkResult `json:"scale_down,omitempty"`
	Delete    *shrinkResult `json:"delete,omitempty"`

	// The engine's own account at the end of the run, for a phase that
	// did not finish: rule problems by rule, plans abandoned after too many
	// conflicts, evaluations of everything.
	EngineProblems   map[string]int64 `json:"engine_problems,omitempty"`
	EngineGaveUp     int64            `json:"engine_gave_up"`
	EngineFullRounds int64            `json:"engine_full_rounds"`
	// Resyncs at rest (--resync-every) and the firings they found that
	// the incremental rounds had missed, by rule: none while evaluation is
	// exact.
	EngineResyncRounds        int64            `json:"engine_resync_rounds"`
	EngineResyncFirings       int64            `json:"engine_resync_firings"`
	EngineResyncFiringsByRule map[string]int64 `json:"engine_resync_firings_by_rule,omitempty"`

	// The engine leader's compaction interval (--compact-every; 0: none)
	// and etcd's compact revision at the end (1: never compacted).
	CompactEverySeconds float64 `json:"compact_every_seconds"`
	CompactRevision     int64   `json:"etcd_compact_revision"`

	TotalSeconds float64 `json:"total_seconds"`
	// LoadAverage is the machine's 1-minute load average when the bench
	// started and when it ended: other work on the machine slows it.
	LoadAverage [2]float64 `json:"load_average"`
}

func printBenchTable(w io.Writer, r *benchResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, val, note string) { fmt.Fprintf(tw, "%s\t%s\t%s\n", name, val, note) }
	row("nodes / instances / services", fmt.Sprintf("%d / %d / %d", r.Nodes, r.Instances, r.Services), fmt.Sprintf("%d CPUs", r.CPUs))
	if r.StoppedIn == "converging" {
		row("apply to converged", "not converged", fmt.Sprintf("stopped after %.0fs: %d of %d running and healthy, %d endpoints",
			r.StoppedAfterSeconds, r.ReadyAtStop, r.Instances, r.EndpointsAtStop))
	} else {
		row("apply to converged", fmt.Sprintf("%.2fs", r.ConvergeSeconds), "every instance running and healthy, every endpoint written")
	}
	row("instances/s", fmt.Sprintf("%.0f", r.InstancesPerSecond), "")
	if r.PaceFirstTenth > 0 {
		row("  first / last tenth", fmt.Sprintf("%.0f / %.0f", r.PaceFirstTenth, r.PaceLastTenth), fmt.Sprintf("instances/s; last ÷ first %.2f", r.PaceLastTenth/r.PaceFirstTenth))
	}
	for _, st := range r.Stages {
		row("  "+st.Stage, fmt.Sprintf("%.2fs", st.P50), fmt.Sprintf("median of the instances; 90th percentile %.2fs, longest %.2fs", st.P90, st.Max))
	}
	if r.ConvergeSeconds > 0 {
		row("placement", fmt.Sprintf("%d–%d a node", r.NodeInstancesMin, r.NodeInstancesMax),
			fmt.Sprintf("instances per node, coefficient of variation %.3f; %d instances beyond an even spread of their service", r.NodeInstancesCV, r.SpreadExcessInstances))
	}
	row("engine time", fmt.Sprintf("%.1fs evaluate", r.EngineEvalSeconds), fmt.Sprintf("%.1fs applying plans (%.1fs more under evaluation), %.1fs waiting for its writes through the watch, %.1fs idle; agents' commits %.1fs",
		r.EngineApplySeconds, r.EngineApplyOverlapSeconds, r.EngineWatchWaitSeconds, r.EngineIdleSeconds, r.AgentCommitSeconds))
	if len(r.Rounds) > 0 {
		row("engine rounds", fmt.Sprintf("%d", len(r.Rounds)), longestRound(r.Rounds))
	}
	row("engine work", fmt.Sprintf("%d tasks", r.EngineWork["tasks"]), workText(r.EngineWork, r.Instances))
	row("keys written", fmt.Sprintf("%d", r.KeysWritten), fmt.Sprintf("engine %d (+%d records), agents %d", r.EngineKeysWritten, r.EngineFirings, r.AgentOps))
	row("engine firings", fmt.Sprintf("%d", r.EngineFirings), formatFirings(r.EngineFiringsByRule))
	row("transactions", fmt.Sprintf("%d", r.Transactions), fmt.Sprintf("engine %d in %d rounds (%s%s), agents %d", r.EngineTxns, r.EngineRounds, budgetText(r.RoundFirings), overlapText(r.OverlapCommit), r.AgentTxns))
	row("compare conflicts", fmt.Sprintf("%d", r.Conflicts), "engine transactions whose compares failed")
	row("committed keys/s", fmt.Sprintf("%.0f", r.KeysPerSecond), "")
	row("raw etcd keys/s", fmt.Sprintf("%.0f", r.RawEtcdKeysPerSecond), fmt.Sprintf("batched put loop, %d puts per transaction, same etcd", r.RawBatch))
	row("ratio to raw", fmt.Sprintf("%.2f", r.RatioToRaw), "")
	cpuNote := r.CPUNote + "; simulated nodes' local caches off (--agent-cache)"
	if r.AgentCache {
		cpuNote = r.CPUNote + "; simulated nodes' local caches on"
	}
	row("CPU seconds", fmt.Sprintf("%.1f", r.CPUSeconds), cpuNote)
	row("collector CPU", fmt.Sprintf("%.1f", r.GCCPUSeconds), fmt.Sprintf("about %.0f%% of the CPU seconds: marking, assists and pauses, as the runtime estimates them (runtime/metrics)", 100*r.GCCPUSeconds/max(r.CPUSeconds, 1e-9)))
	row("peak heap / RSS", fmt.Sprintf("%s / %s", mib(r.PeakHeapBytes), mib(r.PeakRSSBytes)), "whole process")
	row("peak live heap", mib(r.PeakLiveHeapBytes), "the most a collection found live")
	row("collector", fmt.Sprintf("GOGC=%d", r.GCPercent), fmt.Sprintf("soft memory limit %s (set GOGC, GOMEMLIMIT to change them)", mib(r.MemoryLimitBytes)))
	row("converging: peak RSS / live heap", fmt.Sprintf("%s / %s", mib(r.ConvergePeakRSSBytes), mib(r.ConvergePeakLiveHeapBytes)), fmt.Sprintf("up to convergence; live once converged %s", mib(r.ConvergedLiveHeapBytes)))
	row("converged: RSS anonymous / files", fmt.Sprintf("%s / %s", mib(r.ConvergedRSSAnonBytes), mib(r.ConvergedRSSFileBytes)),
		fmt.Sprintf("after a collection; of the first, %s of stacks for %d goroutines; files: the binary, etcd's database", mib(r.ConvergedStackBytes), r.ConvergedGoroutines))
	row("mirror bytes/fact", fmt.Sprintf("%.0f", r.BytesPerFact), fmt.Sprintf("beyond %.0f bytes of key and value; %d facts", r.KVBytesPerFact, r.Facts))
	if r.Changes > 0 {
		row("change p50 / p99", fmt.Sprintf("%.2fms / %.2fms", r.ChangeP50MS, r.ChangeP99MS), fmt.Sprintf("%d health changes, write to endpoint write (max %.2fms)", r.Changes, r.ChangeMaxMS))
		row("  engine part p50 / p99", fmt.Sprintf("%.2fms / %.2fms", r.ChangeEngineP50MS, r.ChangeEngineP99MS), "from the change reaching the mirror")
		row("  engine per flip", fmt.Sprintf("%.2fms evaluate", r.ChangeEngineEvalMS), fmt.Sprintf("%.2fms applying (%.2fms of it etcd's commit; %d transactions in all), %.2fms waiting for its writes through the watch; mean",
			r.ChangeEngineApplyMS, r.ChangeEngineCommitMS, r.ChangeEngineTxns, r.ChangeEngineWatchWaitMS))
		row("  the flip's write p50 / p99", fmt.Sprintf("%.2fms / %.2fms", r.ChangeWriteP50MS, r.ChangeWriteP99MS), "a one-key transaction: etcd's commit latency")
		row("  engine rounds", fmt.Sprint(r.ChangeEngineRounds), fmt.Sprintf("during the change phase; firings %s", formatFirings(r.ChangeFiringsByRule)))
	}
	if r.KilledNodes > 0 {
		row("recovery", fmt.Sprintf("%.2fs", r.RecoverySeconds), fmt.Sprintf("%d nodes, %d instances lost; from lease expiry, grace included", r.KilledNodes, r.LostInstances))
		row("  grace", fmt.Sprintf("%.2fs", r.GraceSeconds), "lease expiry to unreachable (failure policy: 12s)")
		row("  after grace", fmt.Sprintf("%.2fs", r.RecoveryAfterGraceSeconds), "unreachable to replacements running, endpoints updated")
	}
	for _, sr := range []struct {
		name string
		r    *shrinkResult
	}{{"scale down", r.ScaleDown}, {"delete", r.Delete}} {
		if sr.r != nil {
			row(sr.name, fmt.Sprintf("%.2fs", sr.r.Seconds), fmt.Sprintf("%d stopped; a service's stops in at most %d transactions; engine %d rounds, %d firings, %.1fs evaluate, %.1fs applying, %.1fs waiting; CPU %.1fs",
				sr.r.Stopped, sr.r.StopTransactions, sr.r.EngineRounds, sr.r.EngineFirings, sr.r.EngineEvalSeconds, sr.r.EngineApplySeconds, sr.r.EngineWatchWaitSeconds, sr.r.CPUSeconds))
		}
	}
	if len(r.EngineProblems) > 0 || r.EngineGaveUp > 0 {
		row("engine problems", fmt.Sprintf("%v", r.EngineProblems), fmt.Sprintf("%d plans abandoned after conflicts, %d full rounds", r.EngineGaveUp, r.EngineFullRounds))
	}
	if r.EngineResyncFirings > 0 {
		row("missed, then resynced", fmt.Sprintf("%d firings", r.EngineResyncFirings), fmt.Sprintf("by rule %v, found by %d resyncs at rest: the incremental rounds missed them (see the warn log)", r.EngineResyncFiringsByRule, r.EngineResyncRounds))
	}
	row("total", fmt.Sprintf("%.1fs", r.TotalSeconds), fmt.Sprintf("machine load average %.1f at start, %.1f at end", r.LoadAverage[0], r.LoadAverage[1]))
	tw.Flush()
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// progress writes one status line to stderr while the bench runs: redrawn
// in place on a terminal, a line every few seconds otherwise.
type progress struct {
	w   io.Writer
	tty bool

	mu     sync.Mutex // guards the fields below
	name   string
	status func() string
	start  time.Time
	stop   chan struct{}
	shown  bool
}

func newProgress(w io.Writer) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	p := &progress{w: w, tty: tty, stop: make(chan struct{})}
	every := 5 * time.Second
	if tty {
		every = 250 * time.Millisecond
	}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.show()
			}
		}
	}()
	return p
}

// phase starts a phase; status, when given, describes where it is.
func (p *progress) phase(name string, status ...func() string) {
	p.mu.Lock()
	p.name, p.start, p.status = name, time.Now(), nil
	if len(status) > 0 {
		p.status = status[0]
	}
	p.mu.Unlock()
	p.show()
}

func (p *progress) show() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.name == "" {
		return
	}
	line := fmt.Sprintf("bench: %s %.1fs", p.name, time.Since(p.start).Seconds())
	if p.status != nil {
		line += "  " + p.status()
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
	p.shown = true
}

// done stops the progress line and clears it.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.stop:
		return
	default:
	}
	close(p.stop)
	p.name = ""
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// budgetText renders a firing budget, 0 being none.
func budgetText(n int) string {
	if n == 0 {
		return "no firing budget"
	}
	return fmt.Sprintf("at most %d firings each", n)
}

// overlapText says whether plans committed while the next round evaluated.
func overlapText(on bool) string {
	if on {
		return ", each committed while the next evaluated"
	}
	return ""
}

// formatFirings renders firings by rule, the most first: "publish_endpoint
// ×1000, note_unhealthy ×500", or "none".
func formatFirings(by map[string]int64) string {
	if len(by) == 0 {
		return "none"
	}
	rules := slices.Collect(maps.Keys(by))
	slices.SortFunc(rules, func(a, b string) int { return cmp.Or(cmp.Compare(by[b], by[a]), strings.Compare(a, b)) })
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = fmt.Sprintf("%s ×%d", r, by[r])
	}
	return strings.Join(parts, ", ")
}

// workText is the engine's work per instance (engine.WorkKinds), for the table.
func workText(w map[string]int64, n int) string {
	per := func(kind string) string { return fmt.Sprintf("%.1f", float64(w[kind])/float64(max(n, 1))) }
	return fmt.Sprintf("per instance: %s tasks (and %s not run, needless), %s CEL evaluations, %s facts visited, %s aggregate groups computed and %s served kept, %s adjustments of kept ones to a changed fact, %s choice candidates served again unchanged, %s of its own writes come back as planned (dispatched only where its round had not)",
		per("tasks"), per("tasks_needless"), per("cel_evaluations"), per("facts_visited"), per("aggregates_computed"), per("aggregate_hits"), per("aggregate_adjustments"), per("candidates_reused"), per("writes_come_back"))
}
