package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// runClock writes observed/clock every interval until ctx is done. Rules
// about elapsed time (a lease gone for longer than a grace period) read it,
// so time reaches the engine as a fact: the round that acts on it is
// triggered by its change, and `why` shows the clock value it read. A failed
// write is retried at the next tick; time simply stands still meanwhile.
func runClock(ctx context.Context, store *facts.Store, interval time.Duration, log *slog.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	var last time.Time
	for {
		// A tick early within the same second has nothing new to say.
		if now := time.Now().UTC().Truncate(time.Second); !now.Equal(last) {
			_, err := store.PutValue(ctx, facts.Clock(), now)
			switch {
			case err == nil:
				last = now
				if failing {
					log.Info("clock: writing observed/clock again")
					failing = false
				}
			case ctx.Err() == nil && !failing:
				log.Warn("clock: cannot write observed/clock; rules about time wait", "err", err)
				failing = true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
