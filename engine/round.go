package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lead runs rounds for one term. The first round, and the first after a
// swap or an abandoned plan, evaluates everything; every other round
// evaluates the changes the mirror delivered since the previous one. The
// engine's own writes come back this way too; the evaluator plans nothing
// for a value that is already there, so they cost one cheap round.
func (e *Engine) lead(ctx context.Context, t *term) error {
	sub := e.mirror.Subscribe()
	defer sub.Close()
	if err := e.catchUp(ctx); err != nil {
		return err
	}
	pctx, stopPrune := context.WithCancel(ctx)
	defer stopPrune()
	go e.pruneLoop(pctx, t)
	if e.cfg.WhileLeading != nil {
		hookDone := make(chan struct{})
		go func() { defer close(hookDone); e.cfg.WhileLeading(pctx, e.guardsFor(t)) }()
		defer func() { stopPrune(); <-hookDone }()
	}

	full := true
	e.needFull = false
	var retry <-chan time.Time
	var seen int64                  // the mirror revision of the latest evaluation
	from := int64(-1)               // the view revision up to which every change was evaluated (Evaluator.Continue)
	rejected := map[string]string{} // unplaced binding -> its last rejection record (recordRejections)
	invalid := invalidMemory{}      // invalid fact -> the revision it was recorded at (recordInvalid)
	more := false                   // the evaluator stopped at its firing budget with work left (eval.Plan.More)
	ticker := time.NewTicker(e.cfg.TickInterval)
	defer ticker.Stop()
	for {
		ticked := false
		ev, swapped := e.evaluator()
		if swapped {
			e.log.Info("engine: rule set swapped", "version", ev.Version())
			full = true
		}
		if !full && !more {
			e.settle(sub, seen)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-e.swap:
				continue
			case <-retry:
				retry, full = nil, true
				continue
			case <-ticker.C:
				if len(ev.TimedRules()) == 0 {
					continue
				}
				ticked = true
			case <-sub.Ready():
			}
		}
		// Taken before the view: a change that lands after it arrives in
		// the next round, never in none. A tick leaves them for the next.
		var batches []facts.Batch
		var changes []facts.Change
		if !ticked {
			batches = sub.Take()
			changes = merge(batches)
			// A relist (after a compaction or a broken watch) or a batch
			// that touches most facts is cheaper to evaluate in full.
			if relisted(batches) || e.mostFacts(changes) {
				full = true
			}
		}
		waited := time.Now()
		if err := e.mirror.WaitRev(ctx, e.lastRev); err != nil {
			return err
		}
		var p eval.Plan
		e.m.update(func(s *Stats) { s.WatchWaitTime += time.Since(waited) })
		var err error
		start := time.Now()
		if !full && !ticked && !more && len(changes) == 0 {
			continue
		}
		p, err = e.evaluate(func(r facts.Reader) eval.Plan {
			// Under the view the mirror applies nothing: what it
			// applied since the batches were taken is queued, and
			// taking it too makes the changes all there is.
			more := sub.Take()
			if full || relisted(more) {
				full, from = true, r.Rev()
				return ev.Full(r)
			}
			changes = merge(append(batches, more...))
			f := from
			from = r.Rev()
			return ev.Continue(f, r, changes, ticked)
		})
		if err != nil {
			from = -1
		}
		seen = max(seen, p.Rev)
		more = p.More
		wasFull := full
		full = false
		took := time.Since(start)
		e.m.update(func(s *Stats) {
			s.EvalTime += took
			s.Rounds++
			if wasFull {
				s.FullRounds++
			}
			if ticked {
				s.TickRounds++
			}
		})
		if err != nil {
			e.log.Error("engine: evaluation failed; evaluating everything again shortly", "err", err, "version", ev.Version())
			retry = time.After(e.cfg.BackoffMax)
			continue
		}
		e.noteProblems(p)
		writes := 0
		for _, f := range p.Firings {
			writes += len(f.Writes)
		}
		e.m.update(func(s *Stats) {
			s.PlanFirings += int64(len(p.Firings))
			s.PlanWrites += int64(writes)
			s.MaxPlanWrites = max(s.MaxPlanWrites, writes)
		})
		e.log.Debug("engine: round planned", "full", wasFull, "changes", len(changes), "rev", p.Rev, "firings", len(p.Firings),
			"writes", writes, "took", time.Since(start), "version", p.RuleSetVersion)
		if p.RuleSetVersion == "" {
			p.RuleSetVersion = ev.Version()
		}
		// A full round looks at every fact, an incremental one at what changed.
		bad := invalidOf(changes)
		if wasFull {
			bad = e.mirror.Invalid()
		}
		if err := e.recordInvalid(ctx, t, bad, p.RuleSetVersion, invalid); err != nil {
			return err
		}
		if err := e.recordRejections(ctx, t, p, rejected); err != nil {
			return err
		}
		if len(p.Firings) == 0 {
			continue
		}
		applying := time.Now()
		err = e.apply(ctx, t, ev, p)
		e.m.update(func(s *Stats) { s.ApplyTime += time.Since(applying) })
		if err != nil {
			return err
		}
		if e.needFull {
			e.needFull = false
			retry = time.After(e.cfg.BackoffMax)
		}
	}
}

// settle records, before the loop waits, the revision up to which every
// change has been evaluated and its plan committed: that of the latest
// evaluation, or the mirror's own when no batch waits (revisions made
// outside the root, or by the engine's own writes already seen).
func (e *Engine) settle(sub *facts.Subscription, seen int64) {
	rev := e.mirror.Rev() // before looking at the queue: a batch up to rev is queued by now
	if len(sub.Ready()) == 0 {
		seen = max(seen, rev)
	}
	e.m.update(func(s *Stats) { s.SettledRev = max(s.SettledRev, seen) })
}

// catchUp makes the mirror hold everything committed before this term
// began, the previous leader's last writes included, and makes every event
// id of this term sort after the newest record in etcd.
func (e *Engine) catchUp(ctx context.Context) error {
	prefix := e.store.Abs(facts.Event(""))
	resp, err := e.store.Client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return fmt.Errorf("read the newest firing record under %s: %w", prefix, err)
	}
	if len(resp.Kvs) == 1 {
		e.ids.Seed(strings.TrimPrefix(string(resp.Kvs[0].Key), prefix))
	}
	return e.mirror.WaitRev(ctx, resp.Header.Revision)
}

// mostFacts reports whether changes touch more than half of the facts,
// firing records (which no rule reads) aside.
func (e *Engine) mostFacts(changes []facts.Change) bool {
	if len(changes) < 1000 {
		return false
	}
	n := 0
	for _, c := range changes {
		if !strings.HasPrefix(c.Key, "event/") {
			n++
		}
	}
	_, total := e.mirror.Stats()
	return n > total/2
}

func relisted(batches []facts.Batch) bool {
	for _, b := range batches {
		if b.Relist {
			return true
		}
	}
	return false
}

// merge flattens batches into one change per key, the latest, in the order
// the keys last changed; its Prev is the fact's value before the first.
func merge(batches []facts.Batch) []facts.Change {
	last := map[string]int{}
	first := map[string]int{}
	var all []facts.Change
	for _, b := range batches {
		for _, c := range b.Changes {
			if _, seen := first[c.Key]; !seen {
				first[c.Key] = len(all)
			}
			last[c.Key] = len(all)
			all = append(all, c)
		}
	}
	out := make([]facts.Change, 0, len(last))
	for i, c := range all {
		if last[c.Key] == i {
			f := all[first[c.Key]]
			c.Prev, c.PrevKnown = f.Prev, f.PrevKnown
			out = append(out, c)
		}
	}
	return out
}
