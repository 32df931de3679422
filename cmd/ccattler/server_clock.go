package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// runClock writes observed/clock every interval until ctx is done. Rules
// about elapsed time (a lease gone for longer than a grace period) read it,
// so time reaches the engine as a fact: the round that acts on it is
// triggered by its change, and `why` shows the clock value it read. A failed
// write is retried at the next tick; time simply stands still meanwhile.
//
// Only the engine leader runs it (engine.Config.WhileLeading), and every
// write carries the term's guard: with several servers one clock ticks,
// and a deposed leader that has not noticed yet writes nothing.
func runClock(ctx context.Context, store *facts.Store, interval time.Duration, guard []facts.Guard, log *slog.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	failing := false
	var last time.Time
	for {
		// A tick early within the same second has nothing new to say.
		if now := time.Now().UTC().Truncate(time.Second); !now.Equal(last) {
			err := putClock(ctx, store, now, guard)
			switch {
			case err == nil:
				last = now
				if failing {
					log.Info("clock: writing observed/clock again")
					failing = false
				}
			case errors.Is(err, facts.ErrConflict):
				return // the term is over; the next leader's clock ticks
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

func putClock(ctx context.Context, store *facts.Store, now time.Time, guard []facts.Guard) error {
	raw, err := store.Schema.Encode(facts.Clock(), now)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = store.Commit(wctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.Clock(), raw)}, Guard: guard})
	return err
}
