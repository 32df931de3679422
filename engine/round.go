package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// lead runs rounds for one term. The first round, and the first after a
// swap or an abandoned plan, evaluates everything; every other round
// evaluates the changes the mirror delivered since the previous one. The
// engine's own writes come back this way too; the evaluator plans nothing
// for a value that is already there, so they cost one cheap round. Each
// round waits for work, evaluates it and starts committing the plan (wait,
// evaluate, commit), which the next round's evaluation overlaps (launch,
// land: overlap.go); lead returns only on ctx's end or an error of the
// commit step.
func (e *Engine) lead(ctx context.Context, t *term) error {
	l := e.resumed() // the previous term's rounds, to go on with (resume.go)
	if l == nil {
		l = &leader{e: e, sub: e.mirror.Subscribe(), full: true, from: -1, rejected: map[string]string{},
			invalid: invalidMemory{}, extra: map[string]bool{}}
	}
	l.t = t
	defer e.handOn(t.run, l)
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

	e.needFull = false
	l.ticker = time.NewTicker(e.cfg.TickInterval)
	defer l.ticker.Stop()
	resuming := !l.full
	// A plan in flight when the term ends stops with it.
	fctx, stopFlight := context.WithCancel(ctx)
	defer func() {
		stopFlight()
		if l.fly != nil {
			<-l.fly.done
		}
	}()
	for {
		ev, swapped := e.evaluator()
		if swapped {
			e.log.Info("engine: rule set swapped", "version", ev.Version())
			l.full = true
		}
		if l.full && l.fly != nil {
			// Everything is evaluated on committed state: after a
			// swap, a retry, as before a term's first round.
			if err := l.land(ctx, nil, nil); err != nil {
				return err
			}
			continue
		}
		if resuming && !l.full {
			if err := l.settleResumed(ctx, ev); err != nil {
				return err
			}
		}
		resuming = false
		w, ok, err := l.wait(ctx, ev)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		p, ok := l.evaluate(ev, &w)
		if ctx.Err() != nil {
			// The round was cut for it (eval.WithStop): not worth a
			// commit, but the next term evaluates its firings again.
			l.discard(ev, p)
			return ctx.Err()
		}
		if l.fly != nil {
			next := &p
			if !ok {
				next = nil
			}
			if err := l.land(ctx, ev, next); err != nil {
				return err
			}
		}
		if !ok {
			continue
		}
		if err := l.commit(fctx, ev, w, p); err != nil {
			return err
		}
	}
}

// leader is the state one term's rounds hand on to the next, and, when the
// term ends, to the next term's (resume.go). Only the round loop's
// goroutine touches it.
type leader struct {
	e      *Engine
	t      *term
	sub    *facts.Subscription // kept from one term to the next (resume.go)
	ticker *time.Ticker        // tick rounds, for the rules that read the clock

	full     bool              // the next round evaluates everything
	resync   bool              // and does so at rest, as a resync (resync.go)
	fullAt   time.Time         // when the latest full round evaluated
	retry    <-chan time.Time  // makes the next round full when it fires (after a failure)
	seen     int64             // the mirror revision of the latest evaluation
	from     int64             // the view revision up to which every change was evaluated (Evaluator.Continue)
	more     bool              // the evaluator stopped at its firing budget with work left (eval.Plan.More)
	rejected map[string]string // unplaced binding -> its last rejection record (recordRejections)
	invalid  invalidMemory     // invalid fact -> the revision it was recorded at (recordInvalid)

	fly   *flight         // the plan committing while the next round evaluates (overlap.go); nil: none
	laid  []facts.Laid    // the writes laid over the latest evaluation's view
	extra map[string]bool // keys to evaluate again in the next round: firings dropped when a flight landed
	// unsettled: keys the previous term's uncommitted firings read and
	// wrote, evaluated again before this term's first round (resume.go)
	unsettled map[string]bool
}

// work returns what ev did since the previous round's count: all of it for
// an evaluator not seen before (a reload's). Only the rules evaluator
// counts its work; another (a test's wrapper) did none that can be told.
func (e *Engine) work(ev Evaluator) Work {
	r, ok := ev.(ruleSetEvaluator)
	if !ok {
		return Work{}
	}
	c := r.Evaluator
	if e.workEv != c {
		e.workEv, e.workAt = c, Work{}
	}
	now := workOf(c.Stats())
	d := now.Sub(e.workAt)
	e.workAt = now
	return d
}

// work is what one round evaluates.
type work struct {
	ticked  bool // a tick round: the timed rules, no batches
	batches []facts.Batch
	changes []facts.Change // batches merged; after evaluate, with what it took under the view
	full    bool           // set by evaluate: the round evaluated everything
	resync  bool           // set by evaluate: at rest, as a resync
	idle    bool           // set by evaluate: nothing new to evaluate, the evaluator was not called
}

// wait returns the next round's work once there is some: batches from the
// mirror, or a tick while rules read the clock; a full round, or one after
// a round the firing budget cut short, starts at once. It returns false
// when the loop must start over instead: a swap, a retry (which makes the
// next round full), a tick with no timed rule, nothing changed.
func (l *leader) wait(ctx context.Context, ev Evaluator) (w work, ok bool, err error) {
	// A round the budget cut short starts the next without waiting, and
	// one that plans nothing commits nothing: the loop must look for its
	// end here, or a long evaluation would run to its end first.
	if err := ctx.Err(); err != nil {
		return w, false, err
	}
	var resync <-chan time.Time // a resync falls due: it comes when nothing else does first
	if !l.full && !l.more && len(l.extra) == 0 {
		if l.fly == nil {
			l.e.settle(l.sub, l.seen) // not with a plan in flight: its changes are not committed
			if due, ok := l.resyncIn(); ok && due <= 0 && len(l.sub.Ready()) == 0 {
				l.full, l.resync = true, true
			} else if ok && due > 0 {
				t := time.NewTimer(due)
				defer t.Stop()
				resync = t.C
			}
		}
	}
	if !l.full && !l.more && len(l.extra) == 0 {
		select {
		case <-ctx.Done():
			return w, false, ctx.Err()
		case <-l.e.swap:
			return w, false, nil
		case <-l.retry:
			l.retry, l.full = nil, true
			return w, false, nil
		case <-l.ticker.C:
			if len(ev.TimedRules()) == 0 {
				return w, false, nil
			}
			w.ticked = true
		case <-l.sub.Ready():
		case <-l.landing():
			return w, false, l.land(ctx, nil, nil)
		case <-resync:
			return w, false, nil // the loop starts over, and finds it due
		}
	}
	// Taken before the view: a change that lands after it arrives in
	// the next round, never in none. A tick leaves them for the next.
	if !w.ticked {
		w.batches = l.sub.Take()
		w.changes = merge(w.batches)
		if l.resync && len(w.changes) > 0 {
			l.full, l.resync = false, false // not at rest after all: the next rest resyncs
		}
		// A relist (after a compaction or a broken watch) or a batch
		// that touches most facts is cheaper to evaluate in full.
		if relisted(w.batches) || l.e.mostFacts(w.changes) {
			l.full = true
		}
	}
	waited := time.Now()
	if err := l.e.mirror.WaitRev(ctx, l.e.lastRev); err != nil {
		return w, false, err
	}
	l.e.m.update(func(s *Stats) { s.WatchWaitTime += time.Since(waited) })
	if !l.full && !w.ticked && !l.more && len(w.changes) == 0 && len(l.extra) == 0 {
		return w, false, nil
	}
	return w, true, nil
}

// evaluate runs the evaluator on w: Full when the round is full (or the
// mirror relisted meanwhile), Continue otherwise. It returns false when
// the evaluation failed; a full round is then scheduled after BackoffMax.
func (l *leader) evaluate(ev Evaluator, w *work) (eval.Plan, bool) {
	e := l.e
	start := time.Now()
	p, err := l.evaluateOver(func(r facts.Reader, laid []facts.Laid) eval.Plan {
		// Under the view the mirror applies nothing: what it
		// applied since the batches were taken is queued, and
		// taking it too makes the changes all there is.
		more := l.sub.Take()
		if l.resync && len(more) > 0 && !relisted(more) {
			l.full, l.resync = false, false // changes came after all: they are evaluated, the resync waits
		}
		if l.full || relisted(more) {
			l.full, l.from, l.laid = true, r.Rev(), laid
			clear(l.extra)
			if l.resync && !relisted(more) {
				w.resync = true
				return resyncOf(ev, r)
			}
			return ev.Full(r)
		}
		w.changes = l.logical(r, merge(append(w.batches, more...)), laid)
		l.laid = laid
		clear(l.extra)
		// Firing records are no rule's to read (rules.checkSummaries
		// refuses a pattern of one): the evaluator is not given them. A
		// plan's records come back with its writes, and a round that
		// took nothing else has nothing to evaluate.
		read := withoutRecords(w.changes)
		if len(read) == 0 && !w.ticked && !l.more {
			// Only laid writes came back, with their records: the view
			// is the one the evaluator saw last, and from still names it.
			w.idle = true
			return eval.Plan{Rev: r.Rev()}
		}
		f := l.from
		l.from = r.Rev()
		return ev.Continue(f, r, read, w.ticked)
	})
	if err != nil {
		l.from = -1
	}
	l.seen = max(l.seen, p.Rev)
	l.more = p.More
	w.full, l.full, l.resync = l.full, false, false
	if w.full {
		l.fullAt = start
	}
	took := time.Since(start)
	work := e.work(ev)
	e.m.update(func(s *Stats) {
		s.EvalTime += took
		s.Work = s.Work.add(work)
		if !w.idle {
			s.Rounds++
		}
		if w.full && !w.resync { // a resync is counted apart (noteResync)
			s.FullRounds++
		}
		if w.ticked {
			s.TickRounds++
		}
	})
	if err != nil {
		e.log.Error("engine: evaluation failed; evaluating everything again shortly", "err", err, "version", ev.Version())
		l.retry = time.After(e.cfg.BackoffMax)
		return p, false
	}
	e.noteProblems(p)
	if w.resync {
		l.noteResync(ev, p, took)
	}
	writes := 0
	for _, f := range p.Firings {
		writes += len(f.Writes)
	}
	e.m.update(func(s *Stats) {
		s.PlanFirings += int64(len(p.Firings))
		s.PlanWrites += int64(writes)
		s.MaxPlanWrites = max(s.MaxPlanWrites, writes)
	})
	e.log.Debug("engine: round planned", "full", w.full, "changes", len(w.changes), "rev", p.Rev, "firings", len(p.Firings),
		"writes", writes, "took", took, "version", p.RuleSetVersion)
	if e.cfg.OnRound != nil && !w.idle {
		info := RoundInfo{Start: start, Took: took, Full: w.full, Changes: len(w.changes), Firings: map[string]int64{}, Writes: writes}
		for _, f := range p.Firings {
			info.Firings[f.Rule]++
		}
		e.cfg.OnRound(info)
	}
	if p.RuleSetVersion == "" {
		p.RuleSetVersion = ev.Version()
	}
	return p, true
}

// commit records the round's invalid facts and rejections and commits its
// plan, or starts committing it while the next round evaluates (launch,
// land) when the round was cut at its budget or with
// Config.OverlapCommit. An abandoned plan schedules a full round after
// BackoffMax. It returns only on ctx's end or the loss of leadership.
func (l *leader) commit(ctx context.Context, ev Evaluator, w work, p eval.Plan) error {
	e := l.e
	// A full round looks at every fact, an incremental one at what changed.
	bad := invalidOf(w.changes)
	if w.full {
		bad = e.mirror.Invalid()
	}
	err := e.recordInvalid(ctx, l.t, bad, p.RuleSetVersion, l.invalid)
	if err == nil {
		err = e.recordRejections(ctx, l.t, p, l.rejected)
	}
	if err != nil { // the term ended before the plan was applied
		l.discard(ev, p)
		return err
	}
	if len(p.Firings) == 0 {
		return nil
	}
	// A round cut at its budget has its next round's work in hand (the
	// carried tasks): that round need not wait for this plan's writes to
	// come back, so it evaluates while the plan commits. A round that
	// finished waits, so the next takes every change the commit brings
	// at once (Config.OverlapCommit: every round overlaps).
	if e.cfg.OverlapCommit || p.More {
		l.launch(ctx, ev, p)
		return nil
	}
	applying := time.Now()
	err = e.apply(ctx, l.t, ev, p)
	e.m.update(func(s *Stats) { s.ApplyTime += time.Since(applying) })
	if err != nil {
		return err
	}
	l.retryIfAbandoned()
	return nil
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
	prefix := facts.Event("")
	newest, ok, rev, err := e.store.Last(ctx, prefix)
	if err != nil {
		return fmt.Errorf("read the newest firing record under %s: %w", e.store.Abs(prefix), err)
	}
	if ok {
		e.ids.Seed(strings.TrimPrefix(newest.Key, prefix))
	}
	return e.mirror.WaitRev(ctx, rev)
}

// mostFacts reports whether changes touch more than half of the facts,
// firing records (which no rule reads) aside.
func (e *Engine) mostFacts(changes []facts.Change) bool {
	if len(changes) < 1000 {
		return false
	}
	n := 0
	for _, c := range changes {
		if !facts.IsRecord(c.Key) {
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

// withoutRecords returns changes without the firing records among them,
// in a slice of its own: changes keeps them (invalidOf looks at every
// change).
func withoutRecords(changes []facts.Change) []facts.Change {
	out := make([]facts.Change, 0, len(changes))
	for _, c := range changes {
		if !facts.IsRecord(c.Key) {
			out = append(out, c)
		}
	}
	return out
}

// merge flattens batches into one change per key, the latest, in the order
// the keys last changed; its Prev is the fact's value before the first.
// Batches hold tens of thousands of changes while the agents report, so it
// keeps one small entry per key rather than a copy of every change.
func merge(batches []facts.Batch) []facts.Change {
	type span struct {
		last      int // position of the key's last change, over all batches
		prev      []byte
		prevKnown bool
	}
	n := 0
	for _, b := range batches {
		n += len(b.Changes)
	}
	keys := make(map[string]span, n)
	i := 0
	for _, b := range batches {
		for _, c := range b.Changes {
			sp, seen := keys[c.Key]
			if !seen {
				sp.prev, sp.prevKnown = c.Prev, c.PrevKnown
			}
			sp.last = i
			keys[c.Key] = sp
			i++
		}
	}
	out := make([]facts.Change, 0, len(keys))
	i = 0
	for _, b := range batches {
		for _, c := range b.Changes {
			if sp := keys[c.Key]; sp.last == i {
				c.Prev, c.PrevKnown = sp.prev, sp.prevKnown
				out = append(out, c)
			}
			i++
		}
	}
	return out
}

// retryIfAbandoned schedules a full round after BackoffMax when apply
// abandoned a plan (Engine.needFull).
func (l *leader) retryIfAbandoned() {
	if l.e.needFull {
		l.e.needFull = false
		l.retry = time.After(l.e.cfg.BackoffMax)
	}
}
