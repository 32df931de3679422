package engine

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// Config configures an Engine. Start from NewConfig; Validate names the bad field.
type Config struct {
	// MaxTxnOps is the most writes (and, separately, compares) one
	// transaction may hold: etcd's --max-txn-ops. Plans larger than this are
	// split on firing boundaries. 128 is etcd's default; the embedded etcd of
	// `ccattler server` allows embedded.NewConfig().MaxTxnOps.
	MaxTxnOps int
	// MaxTxnBytes bounds the size of one transaction's keys and values, below
	// etcd's --max-request-bytes (default 1.5 MiB).
	MaxTxnBytes int
	// Identity names this engine in the election and in every firing record
	// it writes ("leader"). Default: hostname-pid.
	Identity string
	// LeaderPrefix is the etcd election prefix. It lies outside the fact
	// root, so the mirror never sees it. Default: the root without its
	// trailing slash + "-leader/" (e.g. /ccattler-leader/).
	LeaderPrefix string
	// SessionTTL is how long a leader that stops answering stays leader: a
	// standby takes over within about this long. When the leader dies with
	// etcd's leader (one server running both), etcd's new leader first
	// extends every lease by its election timeout (1 s), so the standby
	// leads about SessionTTL + 1 s after etcd's election. The default, 3 s,
	// keeps that within 5 s; the session renews every SessionTTL/3, so a
	// leader must miss three renewals in a row (a stall of 2 s or more) to
	// lose it, and a lost term is safe: every write is guarded by the
	// election key. etcd's own minimum lease TTL is 1.5 times its election
	// timeout (2 s here).
	SessionTTL time.Duration
	// RetryLimit is how many conflicting attempts in a row, without any firing
	// committed in between, a plan gets before the engine gives up on it and
	// evaluates everything again after a pause.
	RetryLimit int
	// CommitTimeout bounds one transaction attempt; an attempt without an
	// answer is retried (its record keys make that safe).
	CommitTimeout time.Duration
	// BackoffMin and BackoffMax bound the pause between attempts while etcd
	// is unreachable or without quorum.
	BackoffMin, BackoffMax time.Duration
	// EventMaxAge and EventMaxCount bound the firing records kept under
	// event/ (0: no bound of that kind); the oldest go first.
	EventMaxAge   time.Duration
	EventMaxCount int
	// TickInterval is how often rules that read the clock are evaluated
	// (Evaluator.TimedRules).
	TickInterval time.Duration
	// PruneInterval is how often the leader deletes records past retention.
	PruneInterval time.Duration
	// RoundFirings is the firing budget of a round (eval.WithMaxFirings).
	// The engine does not apply it itself: whoever builds the evaluator
	// passes it (the server, to NewRuleSetEvaluator), and Validate checks
	// it. A round that would plan more, such as an apply of
	// thousands of instances, is committed in slices of about this many
	// firings, each evaluated once the previous one is committed, so that
	// the first placements reach the nodes while the rest are evaluated.
	// 0: no budget.
	RoundFirings int
	// RoundCost and RoundTime are each rule's budget of CEL cost and of
	// time in a round (eval.WithRoundBudget): past either, the rule's
	// tasks left are evaluated next round while the others go on, so one
	// costly rule cannot hold them back; four budgets end the round. 0: no
	// budget of that kind.
	RoundCost uint64
	RoundTime time.Duration
	// OverlapCommit commits every round's plan while the next round is
	// evaluated on a view with the plan's writes laid over the mirror
	// (overlap.go), rather than evaluating only once the plan committed.
	// Every write keeps its guards and its record in one transaction
	// either way. Without it only a round cut at its budget overlaps the
	// next, which has its work in hand; a round that finished waits, so
	// the next takes every change the commit brought at once. Off by
	// default: on a 2-core machine shared by etcd, the agents and the
	// engine, overlapping every round ran more, smaller rounds for more
	// CPU at the large preset (BENCHMARKS.md, "Overlapped commit on
	// current main"); since Engine.Pending, one large run was within the
	// default's spread, which is not yet a reason to change it.
	OverlapCommit bool
	// ResyncInterval is how often, at most, the leader evaluates everything
	// once at rest — every change evaluated, every plan committed — and
	// commits what that finds (Evaluator.Resync where the evaluator has it,
	// else Full), as controllers resync their caches. A correct incremental
	// evaluation leaves nothing for it: each firing it plans is one that
	// was missed, committed late rather than never, and counted and logged
	// (Stats.ResyncFirings) so that the miss can be traced. It costs one
	// full evaluation (about a second at 10,000 instances) and waits for
	// rest, so a leader that never rests does not resync. 0: never.
	ResyncInterval time.Duration
	// Log receives the engine's logs; nil discards them.
	Log *slog.Logger
	// WhileLeading, when set, runs for each term of leadership, from its
	// start until it ends (ctx done). guard holds the compares that make a
	// transaction fail once the term is over: writes that only the leader
	// may make (the server's observed/clock) carry it, so a deposed or
	// standby server writes none. The term waits for it to return.
	WhileLeading func(ctx context.Context, guard []facts.Guard)
	// OnRound, when set, is told of each round the leader evaluates as it
	// is planned (rounds that found nothing to evaluate aside): what a
	// benchmark lays out as a timeline. It runs on the engine's goroutine
	// and must return at once.
	OnRound func(RoundInfo)
}

// RoundInfo is one evaluated round, as Config.OnRound is told of it.
type RoundInfo struct {
	Start   time.Time
	Took    time.Duration
	Full    bool             // every rule evaluated whole (startup, reload, a relist, a batch touching most facts)
	Changes int              // the changes since the round before (a full round evaluates everything whatever they are)
	Firings map[string]int64 // planned, by rule (as Stats.FiringsByRule counts those committed)
	Writes  int
}

// DefaultLeaderPrefix is the election prefix beside a fact root:
// /ccattler/ -> /ccattler-leader/.
func DefaultLeaderPrefix(root string) string { return strings.TrimSuffix(root, "/") + "-leader/" }

// NewConfig returns the defaults.
func NewConfig() Config {
	host, _ := os.Hostname()
	if host == "" {
		host = "engine"
	}
	return Config{
		MaxTxnOps:     128,
		MaxTxnBytes:   1 << 20,
		Identity:      fmt.Sprintf("%s-%d", host, os.Getpid()),
		SessionTTL:    3 * time.Second,
		RetryLimit:    8,
		CommitTimeout: 30 * time.Second,
		BackoffMin:    50 * time.Millisecond,
		BackoffMax:    5 * time.Second,
		EventMaxAge:   7 * 24 * time.Hour,
		EventMaxCount: 100000,
		PruneInterval: 30 * time.Second,
		TickInterval:  time.Second,
		// What a round holds (its bindings, overlay and plan, and the
		// watch answers waiting while it reads the mirror) grows with
		// its budget, and the converge hardly moves with it: 1,000 held
		// the medium bench's peak RSS a fifth lower than 5,000 for the
		// same converge, and the large preset's converge was the same;
		// 500 cost the large preset 10 % more CPU, and 1,000 cost
		// 100,000 instances on 3 nodes a tenth more (docs/engine.md).
		RoundFirings: 1000,
		// Five evaluations at the default per-evaluation limit
		// (rules.DefaultCostLimit), or a quarter second.
		RoundCost:      5_000_000,
		RoundTime:      250 * time.Millisecond,
		ResyncInterval: 10 * time.Minute,
	}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.MaxTxnOps < 4:
		return fmt.Errorf("engine: MaxTxnOps %d: expected at least 4 (etcd's default is 128)", c.MaxTxnOps)
	case c.MaxTxnBytes < 4096:
		return fmt.Errorf("engine: MaxTxnBytes %d: expected at least 4096", c.MaxTxnBytes)
	case c.Identity == "" || strings.ContainsAny(c.Identity, "\n\x00"):
		return fmt.Errorf("engine: Identity %q: expected a non-empty single-line name", c.Identity)
	case c.SessionTTL < time.Second:
		return fmt.Errorf("engine: SessionTTL %s: expected at least 1s (etcd leases count whole seconds)", c.SessionTTL)
	case c.RetryLimit < 1:
		return fmt.Errorf("engine: RetryLimit %d: expected at least 1", c.RetryLimit)
	case c.CommitTimeout <= 0:
		return fmt.Errorf("engine: CommitTimeout %s: expected a positive duration", c.CommitTimeout)
	case c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("engine: backoff %s..%s: expected 0 < BackoffMin <= BackoffMax", c.BackoffMin, c.BackoffMax)
	case c.EventMaxAge < 0 || c.EventMaxCount < 0:
		return fmt.Errorf("engine: event retention %s / %d records: expected no negative bound", c.EventMaxAge, c.EventMaxCount)
	case c.TickInterval <= 0:
		return fmt.Errorf("engine: TickInterval %s: expected a positive duration", c.TickInterval)
	case c.RoundFirings < 0:
		return fmt.Errorf("engine: RoundFirings %d: expected 0 (no budget) or more", c.RoundFirings)
	case c.RoundTime < 0:
		return fmt.Errorf("engine: RoundTime %s: expected 0 (no budget) or a positive duration", c.RoundTime)
	case c.ResyncInterval < 0:
		return fmt.Errorf("engine: ResyncInterval %s: expected 0 (never) or a positive duration", c.ResyncInterval)
	case c.PruneInterval <= 0:
		return fmt.Errorf("engine: PruneInterval %s: expected a positive duration", c.PruneInterval)
	}
	return nil
}
