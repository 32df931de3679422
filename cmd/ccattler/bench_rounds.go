package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/ccattler/ccattler/engine"
)

// benchRound is one engine round of the converge phase, as the JSON lays
// the phase out: when it began (from the apply), how long it evaluated,
// and what it planned.
type benchRound struct {
	AtSeconds     float64          `json:"at_seconds"`
	TookSeconds   float64          `json:"took_seconds"`
	Full          bool             `json:"full"`
	Changes       int              `json:"changes"`
	Firings       int64            `json:"firings"`
	Writes        int              `json:"writes"`
	FiringsByRule map[string]int64 `json:"firings_by_rule,omitempty"`
}

// roundLog keeps the rounds the engine tells of (engine.Config.OnRound).
type roundLog struct {
	mu     sync.Mutex
	rounds []engine.RoundInfo
}

func (l *roundLog) note(r engine.RoundInfo) {
	l.mu.Lock()
	l.rounds = append(l.rounds, r)
	l.mu.Unlock()
}

// between returns the rounds that began from start up to end, with their
// times from start.
func (l *roundLog) between(start, end time.Time) []benchRound {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []benchRound
	for _, r := range l.rounds {
		if r.Start.Before(start) || r.Start.After(end) {
			continue
		}
		br := benchRound{AtSeconds: r.Start.Sub(start).Seconds(), TookSeconds: r.Took.Seconds(), Full: r.Full,
			Changes: r.Changes, Writes: r.Writes, FiringsByRule: r.Firings}
		for _, n := range r.Firings {
			br.Firings += n
		}
		out = append(out, br)
	}
	return out
}

// longestRound describes the longest of rounds, for the table.
func longestRound(rounds []benchRound) string {
	if len(rounds) == 0 {
		return "none"
	}
	l := rounds[0]
	for _, r := range rounds[1:] {
		if r.TookSeconds > l.TookSeconds {
			l = r
		}
	}
	kind := "incremental"
	if l.Full {
		kind = "full"
	}
	return fmt.Sprintf("longest %.2fs at %.1fs (%s, %d changes; %s); the rounds one by one in -o json", l.TookSeconds, l.AtSeconds, kind, l.Changes, formatFirings(l.FiringsByRule))
}
