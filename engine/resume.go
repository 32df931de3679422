package engine

import (
	"context"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// A term can end while nobody else wants it: under load the session's
// keepalives go unanswered for SessionTTL, the session ends, and the same
// engine is elected again within milliseconds. Were the new term to start
// with a full round, it would pay, at 100,000 instances, a minute of
// evaluation for nothing, under the very load that ended the term, and the
// load would end the next term in the middle of it.
//
// So a term hands its round loop's state on to the next (handOn, resumed):
// its subscription to the mirror, still queueing, and the revision up to
// which every change was evaluated. The next term goes on from there. What
// the ended term planned and did not commit — a plan cut by the term's end,
// firings left pending by a commit that failed its leadership guard, the
// stale firings a conflict left to evaluate again — is evaluated again
// first, with Incremental over the keys those firings read and write
// (unsettled), as a conflict's stale firings are.
//
// The state is kept for resumeWindow only: an engine that lost its term to
// a standby would otherwise queue every change of the cluster while it
// waits. It is not kept when the next round was to be full anyway, nor
// with a plan in flight, which stops with the term unsettled, nor with
// Config.OverlapCommit.
var resumeWindow = 30 * time.Second // a variable for tests

// handOn keeps l for the next term, or closes its subscription when the
// next term must start afresh: run is done (the engine stops), or the next
// round was to be full, or its state is unknown.
func (e *Engine) handOn(run context.Context, l *leader) {
	l.unsettled, e.unsettled = e.unsettled, nil
	e.resumeMu.Lock()
	defer e.resumeMu.Unlock()
	e.dropResumeLocked()
	if run == nil || run.Err() != nil || e.cfg.OverlapCommit || l.fly != nil || l.full || l.retry != nil || l.from < 0 || e.needFull || e.mostUnsettled(l.unsettled) {
		l.sub.Close()
		return
	}
	e.resume = l
	e.resumeTimer = time.AfterFunc(resumeWindow, func() {
		e.resumeMu.Lock()
		defer e.resumeMu.Unlock()
		if e.resume == l {
			e.dropResumeLocked()
		}
	})
}

// resumed returns the leader state the previous term handed on, with the
// keys to evaluate again in l.unsettled, or nil when there is none. Only
// the round loop's goroutine calls handOn and resumed; the window's timer
// may drop the state between them.
func (e *Engine) resumed() *leader {
	e.resumeMu.Lock()
	defer e.resumeMu.Unlock()
	l := e.resume
	if l == nil {
		return nil
	}
	e.resumeTimer.Stop()
	e.resume, e.resumeTimer = nil, nil
	return l
}

// dropResumeLocked forgets the state a term handed on. e.resumeMu is held.
func (e *Engine) dropResumeLocked() {
	if e.resume == nil {
		return
	}
	e.resumeTimer.Stop()
	e.resume.sub.Close()
	e.resume, e.resumeTimer = nil, nil
}

// mostUnsettled reports whether what the term left unsettled is most of
// the facts: a full round is then no dearer than evaluating it again.
func (e *Engine) mostUnsettled(keys map[string]bool) bool {
	_, total := e.mirror.Stats()
	return len(keys) > 1000 && len(keys) > total/2
}

// unsettle notes the keys of a firing planned but not committed, for the
// next term to evaluate again (the round loop's goroutine alone touches
// e.unsettled): the keys it writes (a hole it fills is open again) and the
// facts it read (the binding it fired under).
func (e *Engine) unsettle(f *eval.Firing) {
	if e.unsettled == nil {
		e.unsettled = map[string]bool{}
	}
	for _, w := range f.Writes {
		e.unsettled[w.Key] = true
	}
	for _, r := range f.Reads {
		if guarded(r) && !r.Prefix {
			e.unsettled[r.Key] = true
		}
	}
}

// discard drops a plan the term ended before applying: the evaluator is
// told, and the next term evaluates its firings again.
func (l *leader) discard(ev Evaluator, p eval.Plan) {
	if len(p.Firings) == 0 {
		return
	}
	ev.Uncommitted()
	for i := range p.Firings {
		l.e.unsettle(&p.Firings[i])
	}
}

// unsettleKeys notes keys for the next term to evaluate again.
func (e *Engine) unsettleKeys(keys map[string]bool) {
	if len(keys) == 0 {
		return
	}
	if e.unsettled == nil {
		e.unsettled = map[string]bool{}
	}
	for k := range keys {
		e.unsettled[k] = true
	}
}

// settleResumed evaluates again, at a resumed term's start, what the
// previous term left unsettled, and commits the plan.
func (l *leader) settleResumed(ctx context.Context, ev Evaluator) error {
	e := l.e
	keys := l.unsettled
	l.unsettled = nil
	e.log.Info("engine: resuming the previous term's rounds", "from", l.from, "unsettled_keys", len(keys))
	if len(keys) == 0 {
		return nil
	}
	p, err := e.evaluate(func(r facts.Reader) eval.Plan { return ev.Incremental(r, changesFor(r, keys)) })
	if err != nil {
		e.log.Error("engine: evaluating again what the last term left failed; evaluating everything", "err", err)
		l.full = true
		return nil
	}
	e.m.update(func(s *Stats) { s.Reevaluated += int64(len(keys)) })
	// The evaluator has now seen every key the last term's flight laid
	// as the mirror holds it: none is laid any more, and one of them
	// coming back is a change to evaluate, not a laid write come back.
	l.laid = nil
	l.more = l.more || p.More
	return l.commit(ctx, ev, work{}, p)
}
