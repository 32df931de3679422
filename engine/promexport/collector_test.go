package promexport_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/promexport"
	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/facts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestCollector(t *testing.T) {
	stats := engine.Stats{Leading: true, Rounds: 7, Txns: 4, CommitTime: 2 * time.Second, MaxCommitTime: time.Second,
		Conflicts: 2, PlanWrites: 30, MaxPlanWrites: 12,
		FiringsByRule: map[string]int64{"schedule": 5, "publish_endpoint": 3}, ProblemsByRule: map[string]int64{},
		ResyncRounds: 3, ResyncFiringsByRule: map[string]int64{"note_stopped": 1},
		EvalTime: 1500 * time.Millisecond, Work: engine.Work{Tasks: 40, Evals: 90, FactsVisited: 480, Aggregates: 2, AggregateHits: 50, Adjustments: 59, CandidatesReused: 7, Needless: 11, WritesBack: 13}}
	loaded := time.Unix(1700000000, 0)
	cases := []struct {
		name    string
		src     promexport.Sources
		metrics []string
		want    string
	}{
		{
			name: "engine",
			src:  promexport.Sources{Engine: func() engine.Stats { return stats }},
			metrics: []string{"ccattler_engine_firings_total", "ccattler_engine_commit_duration_seconds", "ccattler_engine_txn_conflicts_total", "ccattler_engine_plan_writes_max", "ccattler_engine_leading",
				"ccattler_engine_resync_rounds_total", "ccattler_engine_resync_firings_total", "ccattler_engine_evaluate_seconds_total", "ccattler_engine_work_total"},
			want: `
ccattler_engine_commit_duration_seconds_sum 2
ccattler_engine_commit_duration_seconds_count 4
ccattler_engine_evaluate_seconds_total 1.5
ccattler_engine_firings_total{rule="publish_endpoint"} 3
ccattler_engine_firings_total{rule="schedule"} 5
ccattler_engine_leading 1
ccattler_engine_plan_writes_max 12
ccattler_engine_resync_firings_total{rule="note_stopped"} 1
ccattler_engine_resync_rounds_total 3
ccattler_engine_txn_conflicts_total 2
ccattler_engine_work_total{kind="aggregate_adjustments"} 59
ccattler_engine_work_total{kind="aggregate_hits"} 50
ccattler_engine_work_total{kind="aggregates_computed"} 2
ccattler_engine_work_total{kind="candidates_reused"} 7
ccattler_engine_work_total{kind="cel_evaluations"} 90
ccattler_engine_work_total{kind="facts_visited"} 480
ccattler_engine_work_total{kind="tasks"} 40
ccattler_engine_work_total{kind="tasks_needless"} 11
ccattler_engine_work_total{kind="writes_come_back"} 13
`,
		},
		{
			name: "mirror and rule set",
			src: promexport.Sources{
				Mirror: func() (facts.MirrorStats, int) { return facts.MirrorStats{Events: 9, Relists: 1}, 42 },
				Reload: func() reload.Status {
					return reload.Status{Version: "3c2e813702dc", Source: "/etc/ccattler/policies", LoadedAt: loaded, Rules: 12, Reloads: 2, Failures: 1}
				},
			},
			metrics: []string{"ccattler_mirror_facts", "ccattler_ruleset_info", "ccattler_ruleset_reload_failures_total", "ccattler_ruleset_loaded_timestamp_seconds", "ccattler_engine_rounds_total"},
			want: `
ccattler_mirror_facts 42
ccattler_ruleset_info{source="/etc/ccattler/policies",version="3c2e813702dc"} 1
ccattler_ruleset_loaded_timestamp_seconds 1.7e+09
ccattler_ruleset_reload_failures_total 1
`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The pedantic registry checks each metric against its description.
			reg := prometheus.NewPedanticRegistry()
			reg.MustRegister(promexport.New(tc.src))
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			if got := render(mfs, tc.metrics); got != strings.TrimSpace(tc.want) {
				t.Errorf("metrics:\n%s\nwant:\n%s", got, strings.TrimSpace(tc.want))
			}
		})
	}
}

// render writes the named families as "name{labels} value" lines, in the
// registry's order (by name, then labels).
func render(mfs []*dto.MetricFamily, names []string) string {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var b strings.Builder
	for _, mf := range mfs {
		if !want[mf.GetName()] {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			lbl := ""
			if len(labels) > 0 {
				lbl = "{" + strings.Join(labels, ",") + "}"
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				fmt.Fprintf(&b, "%s%s %g\n", mf.GetName(), lbl, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				fmt.Fprintf(&b, "%s%s %g\n", mf.GetName(), lbl, m.GetGauge().GetValue())
			case dto.MetricType_SUMMARY:
				fmt.Fprintf(&b, "%s_sum%s %g\n%s_count%s %d\n", mf.GetName(), lbl, m.GetSummary().GetSampleSum(),
					mf.GetName(), lbl, m.GetSummary().GetSampleCount())
			}
		}
	}
	return strings.TrimSpace(b.String())
}
