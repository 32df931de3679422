package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// CompactStats are a Compactor's counters since it was made, over every
// term it ran in.
type CompactStats struct {
	Compactions int64         // compactions etcd applied
	Failures    int64         // compactions that failed (tried again an interval later)
	Revision    int64         // the last compaction's revision: history before it is gone
	Time        time.Duration // total time of the compactions applied
	MaxTime     time.Duration // the slowest of them
	// SpaceRecoveries counts the times etcd was found out of space (its
	// NOSPACE alarm) after a compaction, and defragmented and disarmed.
	SpaceRecoveries int64
}

// Compactor bounds etcd's history the way Kubernetes' apiserver does: every
// interval it compacts to the revision it read one interval earlier, so
// that at least one interval of history stays readable (`ccattler why`
// reads the values its firings read; a watcher that reconnects within the
// interval resumes where it was). Without it etcd keeps every version of
// every key: each firing record, each rewritten observed fact, growing its
// in-memory index and its backend file for good.
//
// It runs on the engine leader only (Run from Config.WhileLeading): one
// compaction goes through Raft and is every member's, so one compactor per
// cluster is enough, and the election picks it. etcd's own auto-compaction
// (--auto-compaction-mode) would do as much for the embedded member, and
// pauses on members that are not Raft's leader; it is left off all the
// same: an external etcd (--etcd) is not ours to configure, and one
// compactor for both keeps one interval, one log line and one metric for
// operators to read. An external cluster that compacts by itself as well
// is harmless: a compaction to a revision it has passed is skipped.
type Compactor struct {
	store *facts.Store
	every time.Duration
	log   *slog.Logger

	mu sync.Mutex // guards s
	s  CompactStats
}

// NewCompactor returns a compactor of store's etcd that compacts every
// interval (positive); log gets one line per compaction (nil: none).
// store must be etcd's root user's (facts.ErrCompactDenied otherwise); it
// need not be the engine's: Run takes the engine's term guard.
func NewCompactor(store *facts.Store, every time.Duration, log *slog.Logger) *Compactor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Compactor{store: store, every: every, log: log}
}

// Stats returns the counters.
func (c *Compactor) Stats() CompactStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// Every is the interval.
func (c *Compactor) Every() time.Duration { return c.every }

// Run compacts every interval until ctx is done, guard fails (the term
// is over: a deposed leader compacts no more) or etcd refuses store's
// user the compaction. A term's first compaction
// comes one interval after it starts, to the revision at its start: a new
// leader keeps as much history as the old one did. A failure is logged and
// counted; the next interval tries again.
func (c *Compactor) Run(ctx context.Context, guard []facts.Guard) {
	prev, err := c.store.Revision(ctx)
	if err != nil && ctx.Err() == nil {
		c.log.Warn("etcd compaction: cannot read the revision; the first compaction waits an interval more", "err", err)
	}
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		next, ok := c.step(ctx, prev, guard)
		if !ok {
			return
		}
		prev = next
		c.recoverSpace(ctx)
	}
}

// step compacts to prev, the revision read an interval ago, and returns
// the revision now, the next step's target (prev again when it cannot be
// read); ok is false once guard fails.
func (c *Compactor) step(ctx context.Context, prev int64, guard []facts.Guard) (next int64, ok bool) {
	next, err := c.store.Revision(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("etcd compaction: cannot read the revision; trying again next interval", "err", err)
		}
		next = prev // an interval late, which keeps more history, never less
	}
	if prev <= c.Stats().Revision {
		return next, true // nothing new since the last compaction
	}
	// Compaction takes no compare, so the term's guard is checked by a
	// transaction of its own, writing nothing, just before.
	if _, err := c.store.Commit(ctx, facts.Txn{Guard: guard, Checked: true}); err != nil {
		if errors.Is(err, facts.ErrConflict) {
			return next, false
		}
		if ctx.Err() == nil {
			c.fail(prev, err)
		}
		return next, true
	}
	// Out of space, the compaction is waited for until etcd has deleted
	// the old versions, so that recoverSpace defragments without them.
	// Decided under the guard, the compaction is seen through when the
	// term or the server ends meanwhile: cut off, etcd may apply it all the
	// same, and the stats would then name a revision etcd is past. Waiting
	// for the deletion too (out of space) ends with the context, as it may
	// take long on a large backend.
	compact, cctx, detached := c.store.Compact, ctx, false
	if alarmed, err := c.store.SpaceAlarmed(ctx); err == nil && alarmed {
		compact = c.store.CompactAndWait
	} else {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), compactTimeout)
		defer cancel()
		detached = true
	}
	start := time.Now()
	err = compact(cctx, prev)
	took := time.Since(start)
	switch {
	case err == nil:
		c.mu.Lock()
		c.s.Compactions++
		c.s.Revision = prev
		c.s.Time += took
		c.s.MaxTime = max(c.s.MaxTime, took)
		c.mu.Unlock()
		c.log.Info("etcd compacted", "rev", prev, "took", took.Round(time.Microsecond), "kept", c.every)
	case errors.Is(err, facts.ErrCompactDenied):
		c.fail(prev, err)
		c.log.Warn("etcd compaction stops: etcd lets only its root user compact, and this server reaches it as another; " +
			"give the server root's certificate or compact etcd by other means (etcd's --auto-compaction-mode)")
		return next, false
	case errors.Is(err, facts.ErrCompacted):
		// Compacted past prev already: by etcd itself, or an operator.
		c.log.Debug("etcd compaction: already compacted past the revision", "rev", prev)
	case ctx.Err() == nil || detached: // not cut off by the context's end
		c.fail(prev, err)
	}
	return next, true
}

// compactTimeout bounds one compaction request, waited for past the
// compactor's context (step).
const compactTimeout = 10 * time.Second

func (c *Compactor) fail(rev int64, err error) {
	c.mu.Lock()
	c.s.Failures++
	c.mu.Unlock()
	c.log.Warn("etcd compaction failed; trying again next interval", "rev", rev, "err", err)
}

// recoverSpace, after a compaction, brings etcd back from its NOSPACE
// alarm: the backend file outgrew the quota (compaction frees pages in it,
// only defragmentation gives them back) and etcd takes no puts, the
// engine's and the agents' included, until the alarm is disarmed
// (facts.Store.RecoverSpace). A failure is logged; the next interval
// tries again.
func (c *Compactor) recoverSpace(ctx context.Context) {
	start := time.Now()
	done, err := c.store.RecoverSpace(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		c.log.Warn("etcd is out of space (NOSPACE alarm) and could not be defragmented and disarmed; trying again next interval", "err", err)
	case done:
		c.mu.Lock()
		c.s.SpaceRecoveries++
		c.mu.Unlock()
		c.log.Warn("etcd was out of space (NOSPACE alarm): compacted, defragmented and disarmed; writes go on",
			"took", time.Since(start).Round(time.Millisecond))
	}
}
