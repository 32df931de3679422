package engine

import (
	"context"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// pruneLoop deletes firing records past retention every PruneInterval while
// the term lasts.
func (e *Engine) pruneLoop(ctx context.Context, t *term) {
	tick := time.NewTicker(e.cfg.PruneInterval)
	defer tick.Stop()
	for {
		if _, err := e.prune(ctx, t, time.Now()); err != nil && ctx.Err() == nil {
			e.log.Warn("engine: pruning firing records failed; trying again later", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// prune deletes the oldest firing records beyond EventMaxCount and those
// older than EventMaxAge, in transactions of at most MaxTxnOps deletes
// guarded by the leader key. Record keys sort in time order, so the victims
// are a prefix of event/. It returns how many it deleted.
func (e *Engine) prune(ctx context.Context, t *term, now time.Time) (int, error) {
	var victims []string
	e.mirror.View(func(r facts.Reader) {
		excess := 0
		if e.cfg.EventMaxCount > 0 {
			if et, ok := e.store.Schema.Type("event"); ok {
				excess = r.CountOfType(et) - e.cfg.EventMaxCount
			}
		}
		r.Prefix("event/", func(f facts.Fact) bool {
			at, ok := facts.EventTime(strings.TrimPrefix(f.Key, "event/"))
			if !ok {
				return true // not a firing record: not ours to delete
			}
			if excess > 0 || (e.cfg.EventMaxAge > 0 && now.Sub(at) > e.cfg.EventMaxAge) {
				victims = append(victims, f.Key)
				excess--
				return true
			}
			return false
		})
	})
	deleted := 0
	for len(victims) > 0 {
		n := min(len(victims), e.opsLimit())
		txn := facts.Txn{Guard: e.guardsFor(t)}
		for _, k := range victims[:n] {
			txn.Ops = append(txn.Ops, facts.Delete(k))
		}
		if _, err := e.store.Commit(ctx, txn); err != nil {
			return deleted, err
		}
		deleted += n
		victims = victims[n:]
		e.m.update(func(s *Stats) { s.EventsPruned += int64(n) })
	}
	if deleted > 0 {
		e.log.Info("engine: pruned firing records", "deleted", deleted)
	}
	return deleted, nil
}
