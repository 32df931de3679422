package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// Evaluator turns facts into plans. It is pure: it reads only the Reader it
// is given (valid only during the call) and never writes. A plan's writes of
// a value equal to the stored one must be left out, or the engine's own
// writes, which come back through the mirror, would keep it busy. The
// evaluator must not assume its plans commit: what does not commit comes
// back to it as changes, and Uncommitted says so. Calls never overlap.
//
// The engine calls Full for a term's first round (unless the term goes on
// from the previous one's, resume.go) and after a swap, a relist or an
// abandoned plan, and Continue for every other round; Incremental only
// to evaluate again the bindings whose firings a conflict dropped.
type Evaluator interface {
	// Full evaluates every rule binding, keeping nothing from earlier calls.
	Full(r facts.Reader) eval.Plan
	// Continue evaluates changes (and, with tick set, the TimedRules),
	// given that they are all the changes after revision from — the
	// revision of the reader of its previous call — up to r.Rev(). An
	// evaluator may keep results from one call to the next on that
	// promise; a from it does not recognise (-1 after a failed round)
	// means it must not. A change may repeat a value the evaluator has
	// seen: evaluating it again must then plan nothing new.
	Continue(from int64, r facts.Reader, changes []facts.Change, tick bool) eval.Plan
	// Incremental evaluates the bindings that read any of the changed
	// keys, with no promise that they are all the changes since the
	// previous call.
	Incremental(r facts.Reader, changes []facts.Change) eval.Plan
	// Uncommitted says that firings of a plan it returned did not commit.
	Uncommitted()
	// TimedRules names the rules that read the clock (now): time passing
	// is not a fact change, so the engine calls Continue with tick set
	// every Config.TickInterval while there are any (none: no tick rounds).
	TimedRules() []string
	// Version is the rule set's version hash, recorded in every firing
	// record.
	Version() string
}

// Engine runs an Evaluator on a facts.Mirror and commits its plans to the
// store while it is the elected leader. Create it with New, run it with Run.
type Engine struct {
	cfg    Config
	store  *facts.Store
	mirror *facts.Mirror
	log    *slog.Logger
	ids    *facts.EventIDs
	m      *metrics

	mu   sync.Mutex // guards ev and next
	ev   Evaluator
	next Evaluator     // a swap waiting for the next round; nil if none
	swap chan struct{} // has a token while next is set

	// needFull is set by apply when a plan was abandoned; only the round
	// loop's goroutine touches it.
	needFull bool
	// unsettled holds the keys of firings this term planned and did not
	// commit (resume.go); only the round loop's goroutine touches it.
	unsettled map[string]bool
	// resume is the round loop's state an ended term handed on to the
	// next, dropped by resumeTimer after resumeWindow; resumeMu guards both.
	resumeMu    sync.Mutex
	resume      *leader
	resumeTimer *time.Timer
	// maxOps and maxBytes are the transaction limits in force (opsLimit).
	maxOps, maxBytes atomic.Int64
	// loseAnswer, set by tests, makes a committed transaction look as if
	// its answer never came, when it returns true.
	loseAnswer func() bool
	// beforeCommit, set by tests, runs before each chunk's transaction,
	// on the goroutine that commits it.
	beforeCommit func(chunk []*staged)
	// lastRev is the revision of the engine's latest commit; a round waits
	// until the mirror holds it, so it never plans against its own past.
	// Only the round loop's goroutine touches it.
	lastRev int64
	// workEv is the evaluator workAt holds the counters of, as of the
	// latest round (Stats.Work): kept across terms, since an evaluator
	// outlives them. Only the round loop's goroutine touches them.
	workEv *eval.Evaluator
	workAt Work
	// flying is set while a plan is in flight (overlap.go), for Pending.
	flying atomic.Bool
}

// New returns an engine that evaluates ev on mirror and writes through store.
// The caller runs the mirror (facts.Mirror.Run); the engine only reads it.
func New(store *facts.Store, mirror *facts.Mirror, ev Evaluator, cfg Config) (*Engine, error) {
	if store == nil || mirror == nil || ev == nil {
		return nil, errors.New("engine: New needs a store, a mirror and an evaluator")
	}
	if cfg.LeaderPrefix == "" {
		cfg.LeaderPrefix = DefaultLeaderPrefix(store.Root)
	}
	if strings.HasPrefix(cfg.LeaderPrefix, store.Root) {
		return nil, fmt.Errorf("engine: LeaderPrefix %q lies under the fact root %q: expected a prefix outside it", cfg.LeaderPrefix, store.Root)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{cfg: cfg, store: store, mirror: mirror, log: log.With("engine", cfg.Identity),
		ids: facts.NewEventIDs(), m: newMetrics(), ev: ev, swap: make(chan struct{}, 1)}
	e.maxOps.Store(int64(cfg.MaxTxnOps))
	e.maxBytes.Store(int64(cfg.MaxTxnBytes))
	e.m.update(func(s *Stats) { s.RuleSetVersion = ev.Version() })
	return e, nil
}

// Swap replaces the evaluator between two rounds: the round in progress
// finishes with the old one, the next evaluates everything with the new one.
// Safe to call from any goroutine, leader or not.
func (e *Engine) Swap(ev Evaluator) {
	e.mu.Lock()
	e.next = ev
	e.mu.Unlock()
	select {
	case e.swap <- struct{}{}:
	default:
	}
}

// evaluator returns the evaluator to use for the next round and whether it
// was just swapped in.
func (e *Engine) evaluator() (Evaluator, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.next == nil {
		return e.ev, false
	}
	e.ev, e.next = e.next, nil
	v := e.ev.Version()
	e.m.update(func(s *Stats) { s.RuleSetVersion = v })
	return e.ev, true
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats { return e.m.snapshot() }

// Leader returns the identity of the engine that leads now, as the
// election says (the oldest campaign under LeaderPrefix), or "" when no
// engine campaigns.
func (e *Engine) Leader(ctx context.Context) (string, error) {
	id, err := e.store.Leader(ctx, e.cfg.LeaderPrefix)
	if err != nil {
		return "", fmt.Errorf("read the election under %s: %w", e.cfg.LeaderPrefix, err)
	}
	return id, nil
}

// term is one stretch of leadership: the election key and its create
// revision, which guard every transaction, and the session's end.
type term struct {
	key  string
	rev  int64
	done <-chan struct{}
	run  context.Context // the engine's Run: done when the engine stops, not when the term ends
}

func (t *term) lost() bool {
	if t == nil || t.done == nil {
		return false
	}
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// guardsFor returns the compares that make a deposed leader's transaction
// fail: its election key must still exist with the revision it was created at.
func (e *Engine) guardsFor(t *term) []facts.Guard {
	if t == nil || t.key == "" {
		return nil
	}
	return []facts.Guard{facts.CreatedAt(t.key, t.rev)}
}

// stillLeader asks etcd whether the term's key still stands.
func (e *Engine) stillLeader(ctx context.Context, t *term) (bool, error) {
	if t == nil || t.key == "" {
		return true, nil
	}
	if t.lost() {
		return false, nil
	}
	rev, err := e.store.CreateRevision(ctx, t.key)
	if err != nil {
		return true, fmt.Errorf("read leader key %s: %w", t.key, err)
	}
	return rev == t.rev, nil
}

// Run campaigns for leadership and, while leader, evaluates and commits
// rounds. A standby waits in the campaign. When the session ends (etcd
// unreachable for longer than SessionTTL, or the lease revoked) the term
// ends at once and the engine campaigns again. Run returns ctx.Err() when
// ctx is done, after resigning so that a standby takes over immediately.
func (e *Engine) Run(ctx context.Context) error {
	backoff := e.cfg.BackoffMin
	for {
		err := e.term(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			e.log.Warn("engine: leadership ended", "err", err, "retry_in", backoff)
			if !facts.Sleep(ctx, backoff) {
				return ctx.Err()
			}
			backoff = min(backoff*2, e.cfg.BackoffMax)
			continue
		}
		backoff = e.cfg.BackoffMin
	}
}

// term campaigns once and leads until the session ends or ctx is done.
func (e *Engine) term(ctx context.Context) error {
	e.log.Info("engine: campaigning", "prefix", e.cfg.LeaderPrefix)
	el, err := e.store.Campaign(ctx, e.cfg.LeaderPrefix, e.cfg.Identity, e.cfg.SessionTTL)
	if err != nil {
		return err
	}
	defer el.Close() // revokes the lease: the key goes, a standby wins at once
	t := &term{key: el.Key(), rev: el.Rev(), done: el.Done(), run: ctx}
	e.m.update(func(s *Stats) { s.Terms++; s.Leading = true })
	defer e.m.update(func(s *Stats) { s.Leading = false })
	e.log.Info("engine: leading", "key", t.key, "rev", t.rev)

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-el.Done():
			cancel() // stop before anyone else can start: the guard already fails
		case <-lctx.Done():
		}
	}()
	err = e.lead(lctx, t)
	if ctx.Err() == nil && t.lost() {
		err = errLostLeadership
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer rcancel()
	_ = el.Resign(rctx)
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		err = errLostLeadership
	}
	return err
}

// evaluate runs fn on a consistent view of the mirror. A panic in the
// evaluator is an error, not a crash of the control plane.
func (e *Engine) evaluate(fn func(r facts.Reader) eval.Plan) (p eval.Plan, err error) {
	e.mirror.View(func(r facts.Reader) {
		defer func() {
			if x := recover(); x != nil {
				err = fmt.Errorf("evaluator panicked: %v", x)
			}
		}()
		p = fn(r)
	})
	return p, err
}

func (e *Engine) noteProblems(p eval.Plan) {
	for _, pr := range p.Problems {
		e.log.Warn("engine: rule not evaluated this round", "rule", pr.Rule, "err", pr.Err, "version", p.RuleSetVersion)
	}
	if len(p.Problems) > 0 {
		e.m.update(func(s *Stats) {
			s.Problems += int64(len(p.Problems))
			for _, pr := range p.Problems {
				s.ProblemsByRule[pr.Rule]++
			}
		})
	}
}

func (e *Engine) noteCommitted(rev int64) { e.lastRev = max(e.lastRev, rev) }
