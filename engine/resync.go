package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// Incremental evaluation is exact by design: a change evaluates every
// binding that reads it, and the next round every binding a budget left.
// Should a binding be missed all the same (a bug: a stop never noted at
// 100,000 instances once in a few runs), nothing would evaluate it again
// until the next full round, and none comes without a restart or a
// reload. So at rest — every change evaluated, every plan committed, no
// work carried — and at most every Config.ResyncInterval, the leader
// evaluates everything once, without the round's bounds, and commits what
// that plans like any other round. At rest a correct evaluation plans
// nothing, so each firing is a miss healed late rather than never; it is
// counted by rule (Stats.ResyncFirings) and logged with its keys, so that
// the miss can be traced. The rules that read now are left out of the
// count: time passing since their last tick, not a missed change, makes
// their firings due.

// resyncer is an Evaluator that can evaluate everything at once, its
// round bounds aside (eval.Evaluator.Resync); one that cannot resyncs
// with Full.
type resyncer interface {
	Resync(r facts.Reader) eval.Plan
}

// resyncOf evaluates everything on r for a resync.
func resyncOf(ev Evaluator, r facts.Reader) eval.Plan {
	if rs, ok := ev.(resyncer); ok {
		return rs.Resync(r)
	}
	return ev.Full(r)
}

// resyncIn returns how long until a resync is due, and false when the
// engine never resyncs.
func (l *leader) resyncIn() (time.Duration, bool) {
	every := l.e.cfg.ResyncInterval
	if every <= 0 {
		return 0, false
	}
	return time.Until(l.fullAt.Add(every)), true
}

// resyncKeys is how many of a resync's written keys its log line names.
const resyncKeys = 10

// noteResync counts a resync round and what it found, and logs it: at
// Info when it found nothing, at Warn, with the first keys it writes, when
// it found missed firings.
func (l *leader) noteResync(ev Evaluator, p eval.Plan, took time.Duration) {
	timed := ev.TimedRules()
	byRule := map[string]int64{}
	var keys []string
	missed := int64(0)
	for _, f := range p.Firings {
		if slices.Contains(timed, f.Rule) {
			continue
		}
		missed++
		byRule[f.Rule]++
		for _, w := range f.Writes {
			if len(keys) < resyncKeys {
				keys = append(keys, w.Key)
			}
		}
	}
	l.e.m.update(func(s *Stats) {
		s.ResyncRounds++
		s.ResyncFirings += missed
		for r, n := range byRule {
			s.ResyncFiringsByRule[r] += n
		}
	})
	if missed == 0 {
		l.e.log.Info("engine: resync at rest found nothing missed", "rev", p.Rev, "took", took, "firings", len(p.Firings))
		return
	}
	var counts []string
	for _, r := range slices.Sorted(maps.Keys(byRule)) {
		counts = append(counts, fmt.Sprintf("%s=%d", r, byRule[r]))
	}
	l.e.log.Warn("engine: resync at rest found firings the incremental rounds missed; committing them",
		"missed", missed, "rev", p.Rev, "took", took, "version", ev.Version(), "keys", keys, "by_rule", strings.Join(counts, " "))
}
