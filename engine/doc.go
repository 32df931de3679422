// Package engine runs a rule set's evaluator on the fact mirror and writes
// its conclusions to etcd.
//
// A tour:
//
//   - engine.go: Engine, the Evaluator it runs, Swap, and Run, which
//     campaigns in an etcd election (client/v3/concurrency) and leads while
//     it holds it. A standby waits in the campaign.
//   - round.go: the rounds of one term. The first evaluates everything
//     (Full); each later one evaluates the changes the mirror delivered
//     (Continue); every TickInterval the rules that read the clock are
//     evaluated too (Continue with tick). A swapped evaluator takes over
//     between rounds.
//   - overlap.go: with Config.OverlapCommit, a round's plan commits while
//     the next round evaluates.
//     At most one plan is in flight; the next round's view has its writes
//     laid over the mirror (facts.Mirror.ViewOver, read-your-writes until
//     they come back through the watch), and the next plan commits only
//     after it landed: its reads of laid writes then get the revisions
//     those committed at, compared like any read, and its firings that
//     read a write that did not commit (or AfterAll ones, when any did
//     not) are dropped and evaluated again the round after. So every
//     write still commits with its guards and its record in one
//     transaction, and nothing commits on a write that did not. The
//     evaluator is handed the exact difference between the views it saw
//     (laid values included), so the results it keeps do not drift. A
//     full round (first, after a swap or an abandoned plan) waits for the
//     plan in flight and evaluates committed state, as does the loop
//     before it waits for changes, so SettledRev still means committed.
//   - commit.go: a Plan becomes etcd transactions. Every write is guarded by
//     the ModRevision of each fact its firing read (0: still absent), every
//     transaction by the leader key, so a deposed leader writes nothing.
//     Plans larger than MaxTxnOps split on firing boundaries. A failed
//     compare drops the stale firings, commits the rest and evaluates the
//     dropped bindings again on fresher state.
//   - record.go: each firing's record, event/{timestamp}-{sequence},
//     committed in the same transaction as the writes it explains.
//   - rejections.go: for a choice that placed nothing, one record of every
//     candidate and the filters it failed (`ccattler why-not`).
//   - prune.go: retention of records by age and count.
//   - compact.go: Compactor, the compaction of etcd's history every
//     interval to the revision of the interval before, run by the leader
//     (Config.WhileLeading) so that one server of a cluster compacts.
//   - evaluator.go: a compiled rules.RuleSet as an Evaluator (package eval).
//   - metrics.go: counters (Stats).
//
// Usage:
//
//	m := facts.NewMirror(store, log)
//	go m.Run(ctx)
//	e, err := engine.New(store, m, evaluator, engine.NewConfig())
//	go e.Run(ctx) // leads when elected; returns when ctx is done
//	e.Swap(newEvaluator) // between two rounds
package engine
