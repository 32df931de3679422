package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/rules"
)

// noteRules is the default policies' note_stopped: an action that reads
// the clock only to stamp it, as the one a 100,000-instance scale-down
// once missed.
const noteRules = `
rule "note_stopped" {
  doc       = "A stopped instance without a placement gets stopped_at: the clock when it was first seen so."
  principal = "gc"
  match {
    state = "observed/instance/{id}/state"
    clock = "observed/clock"
  }
  absent = ["placement/instance/{id}", "observed/instance/{id}/stopped_at"]
  when   = "state == 'stopped'"
  emit "observed/instance/{id}/stopped_at" { value = "clock" }
}
`

// lossyEval is the real evaluator made to miss on purpose (a fake of a
// bug, not of the evaluator): its incremental rounds never see a change
// of the keys hide names, as if the binding that reads it were dropped.
// Full and Resync see everything.
type lossyEval struct {
	ruleSetEvaluator
	hide func(key string) bool
}

func (l lossyEval) Continue(from int64, r facts.Reader, changes []facts.Change, tick bool) eval.Plan {
	return l.ruleSetEvaluator.Continue(from, r, l.drop(changes), tick)
}

func (l lossyEval) Incremental(r facts.Reader, changes []facts.Change) eval.Plan {
	return l.ruleSetEvaluator.Incremental(r, l.drop(changes))
}

func (l lossyEval) drop(changes []facts.Change) []facts.Change {
	var out []facts.Change
	for _, c := range changes {
		if !l.hide(c.Key) {
			out = append(out, c)
		}
	}
	return out
}

// A binding the incremental rounds miss is fired by the next resync at
// rest, counted by rule and logged with its key; one they do not miss is
// not counted; with resyncs off the miss stays.
func TestResyncFiresWhatIncrementalRoundsMissed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		every time.Duration
	}{{"resync", 700 * time.Millisecond}, {"never", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t)
			rs, diags := rules.LoadFiles(map[string][]byte{"gc.hcl": []byte(noteRules)}, rules.WithSchema(v.store.Schema))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			a, b := "aaaa1", "bbbb2"
			hidden := facts.InstanceState(b)
			ev := lossyEval{NewRuleSetEvaluator(rs, nil).(ruleSetEvaluator), func(k string) bool { return k == hidden }}
			var logs etcdtest.Logs
			cfg := testConfig()
			cfg.ResyncInterval = tc.every
			cfg.Log = logs.Logger()
			v.put(t, facts.Clock(), `"2026-12-04T20:00:00Z"`)
			e := v.engine(t, ev, cfg)
			v.run(t, e)
			for e.Stats().Rounds == 0 {
				time.Sleep(5 * time.Millisecond)
			}

			v.put(t, facts.InstanceState(a), `"stopped"`) // seen by the incremental rounds
			v.waitValue(t, facts.InstanceStoppedAt(a), `"2026-12-04T20:00:00Z"`)
			v.put(t, facts.InstanceState(b), `"stopped"`) // missed by them
			if tc.every == 0 {
				time.Sleep(2 * time.Second)
				if _, ok := v.get(t, facts.InstanceStoppedAt(b)); ok {
					t.Fatal("b's stop was noted without a resync: the lossy evaluator missed nothing, the test proves nothing")
				}
				if s := e.Stats(); s.ResyncRounds != 0 {
					t.Fatalf("%d resync rounds with ResyncInterval 0", s.ResyncRounds)
				}
				return
			}
			v.waitValue(t, facts.InstanceStoppedAt(b), `"2026-12-04T20:00:00Z"`)
			s := e.Stats()
			if s.ResyncRounds == 0 || s.ResyncFirings != 1 || s.ResyncFiringsByRule["note_stopped"] != 1 {
				t.Errorf("resync rounds %d, missed firings %d (by rule %v): want at least 1 round and b's stop alone",
					s.ResyncRounds, s.ResyncFirings, s.ResyncFiringsByRule)
			}
			if !strings.Contains(logs.String(), "incremental rounds missed") || !strings.Contains(logs.String(), facts.InstanceStoppedAt(b)) {
				t.Errorf("no warning naming %s in the engine's log:\n%s", facts.InstanceStoppedAt(b), logs.String())
			}
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "level=WARN") && strings.Contains(line, facts.InstanceStoppedAt(a)) {
					t.Errorf("a's stop, noted incrementally, is named as missed: %s", line)
				}
			}

			// At rest again, later resyncs find nothing more.
			rounds := s.ResyncRounds
			deadline := time.Now().Add(10 * time.Second)
			for e.Stats().ResyncRounds < rounds+2 {
				if time.Now().After(deadline) {
					t.Fatalf("resync rounds stayed at %d for 10s with ResyncInterval %s", e.Stats().ResyncRounds, tc.every)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if s := e.Stats(); s.ResyncFirings != 1 || s.FullRounds != 1 {
				t.Errorf("later resyncs counted %d missed firings in all, want still 1; %d full rounds, want the term's first alone", s.ResyncFirings, s.FullRounds)
			}
		})
	}
}
