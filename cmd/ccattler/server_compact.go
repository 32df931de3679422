package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/pflag"
)

// defaultCompactEvery is how often the engine leader compacts etcd's
// history, keeping the interval before: Kubernetes' apiserver's choice.
const defaultCompactEvery = 5 * time.Minute

// addCompactFlag adds --compact-every to `ccattler server`, dev and bench.
// A bad interval is refused as the flag is parsed, a usage error naming it.
func addCompactFlag(f *pflag.FlagSet, every *time.Duration) {
	*every = defaultCompactEvery
	f.Var((*compactEvery)(every), "compact-every",
		"how often the engine leader compacts etcd's history, keeping one interval of it, as far back as ccattler why and watches reach (0: never compact; etcd then keeps every version of every key)")
}

// compactEvery is --compact-every's value: a duration checked on Set.
type compactEvery time.Duration

func (c *compactEvery) String() string { return time.Duration(*c).String() }
func (c *compactEvery) Type() string   { return "duration" }
func (c *compactEvery) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("expected a duration such as 5m or 30s, or 0 (never compact)")
	}
	if !validCompactEvery(d) {
		return errCompactEvery
	}
	*c = compactEvery(d)
	return nil
}

// validCompactEvery refuses an interval that is negative or too short to
// leave any history: a compaction every millisecond would take the
// history `why` reads with it.
func validCompactEvery(every time.Duration) bool { return every == 0 || every >= time.Second }

// checkCompactEvery is validCompactEvery for a serverConfig made in code.
func checkCompactEvery(every time.Duration) error {
	if !validCompactEvery(every) {
		return usageError("--compact-every %s: %v", every, errCompactEvery)
	}
	return nil
}

var errCompactEvery = errors.New("expected 0 (never compact) or an interval of at least 1s, such as 5m")

// newCompactor returns the server's compactor, nil when --compact-every is
// 0 or the server runs no engine (the leading engine's server compacts).
func newCompactor(cfg serverConfig, store *facts.Store, log *slog.Logger) *engine.Compactor {
	switch {
	case cfg.CompactEvery == 0:
		log.Info("--compact-every 0: etcd's history is never compacted; it grows with every write")
		return nil
	case cfg.NoEngine:
		log.Info("--no-engine: this server does not compact etcd's history; the leading engine's server does")
		return nil
	}
	return engine.NewCompactor(store, cfg.CompactEvery, log)
}

// leaderTasks returns the engine's WhileLeading hook: what the leader, and
// only it, does beside evaluating, for as long as its term lasts: write
// observed/clock every clockEvery and, with a compactor, compact etcd.
func leaderTasks(store *facts.Store, clockEvery time.Duration, compactor *engine.Compactor, log *slog.Logger) func(context.Context, []facts.Guard) {
	return func(ctx context.Context, guard []facts.Guard) {
		var wg sync.WaitGroup
		if compactor != nil {
			wg.Go(func() { compactor.Run(ctx, guard) })
		}
		runClock(ctx, store, clockEvery, guard, log)
		wg.Wait()
	}
}
