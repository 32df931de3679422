package eval_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

const noteFailed = `rule "note_failed" {
  doc       = "A failed instance gets failed_at."
  principal = "failure"
  match { state = "observed/instance/{id}/state" }
  absent = ["observed/instance/{id}/failed_at"]
  when   = "state == 'failed'"
  emit "observed/instance/{id}/failed_at" { value = "now" }
}
`

// TestNeedlessTasksAreThoseThatFindNothing: a task is skipped only when a
// fact its binding names shows it would find nothing (engine/eval/probe.go);
// the facts no rule sees (they break the schema) and values the probe
// cannot read as plain strings are left to the task. Each change is
// evaluated with probes and without, and both fire the same.
func TestNeedlessTasksAreThoseThatFindNothing(t *testing.T) {
	rs := loadSrc(t, noteFailed)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	clock := eval.WithClock(func() time.Time { return now })
	for _, tc := range []struct {
		name     string
		before   map[string]string // instance a's facts before, by attribute
		state    string            // then its state changes to
		fires    bool
		needless bool
	}{
		{name: "running to failed", before: map[string]string{"state": `"running"`}, state: `"failed"`, fires: true},
		{name: "running to stopped: the condition's hint", before: map[string]string{"state": `"running"`}, state: `"stopped"`, needless: true},
		{name: "failed spelled with an escape", before: map[string]string{"state": `"running"`}, state: `"f\u0061iled"`, fires: true},
		{name: "failed_at noted", before: map[string]string{"state": `"running"`, "failed_at": `"2026-12-07T11:00:00Z"`}, state: `"failed"`, needless: true},
		{name: "failed_at breaks the schema: absent for rules", before: map[string]string{"state": `"running"`, "failed_at": `"yesterday"`}, state: `"failed"`, fires: true},
		{name: "state breaks the schema", before: map[string]string{"state": `"running"`}, state: `{"not":"a state"}`, needless: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fired [2][]string
			for i, opts := range [][]eval.Option{{clock}, {clock, eval.WithoutProbes()}} {
				tb := newTable()
				for attr, v := range tc.before {
					tb.put(facts.InstanceAttr("a0001", attr), v)
				}
				ev := eval.New(rs, opts...)
				if p := ev.Full(tb); len(p.Firings) != 0 || len(p.Problems) != 0 {
					t.Fatalf("before the change: %+v %v", p.Firings, p.Problems)
				}
				before := ev.Stats()
				p := ev.Incremental(tb, []facts.Change{tb.put(facts.InstanceState("a0001"), tc.state)})
				for _, f := range p.Firings {
					fired[i] = append(fired[i], fmt.Sprint(f.Rule, f.Writes[0].Key))
				}
				if len(p.Problems) != 0 {
					t.Errorf("problems: %v", p.Problems)
				}
				after := ev.Stats()
				if i == 1 {
					continue
				}
				// A firing's own write dispatches its rule again, a task
				// found needless too (failed_at is there now).
				run := after.Tasks - before.Tasks
				if tc.needless && (run != 0 || after.Needless == before.Needless) {
					t.Errorf("%d tasks run, %d needless; want none run", run, after.Needless-before.Needless)
				}
				if !tc.needless && run == 0 {
					t.Error("no task run")
				}
			}
			if !slices.Equal(fired[0], fired[1]) {
				t.Errorf("fired %v with probes, %v without", fired[0], fired[1])
			}
			if got := len(fired[0]) > 0; got != tc.fires {
				t.Errorf("fired %v, want a firing: %v", fired[0], tc.fires)
			}
		})
	}
}
