// Package eval evaluates a compiled rule set against a snapshot of facts and
// returns a Plan of writes, each with the facts it read. It is pure: it knows
// nothing of etcd; package engine commits its plans.
//
// An Evaluator runs rounds. A round starts from tasks, a rule under a
// partial binding (the empty binding: every binding of the rule), runs them
// in passes over the rules in stratified order until none is left, and
// returns the plan. Full queues every rule; Incremental and Continue turn
// each changed fact into the tasks it affects; Tick queues the rules that
// read now. A firing's writes go into the round's overlay at once and are
// dispatched as changes in turn, so a later rule of the same round sees
// them (read-your-writes) and the round reaches its local fixpoint.
//
// A tour:
//
//   - eval.go: Evaluator, its options, the entry points (Full, Incremental,
//     Continue, Tick) and the round: its task queue by rule, the passes
//     (loop), commit of a firing into the plan and the overlay, and the
//     oscillation check, which stops the rules of a key that keeps
//     returning to an earlier value and evaluates the round again without
//     them.
//   - plan.go: the contract with the engine: Plan, Firing, Read (Rev 0:
//     read as absent; Own: read from an earlier firing of the same plan;
//     NoGuard: an aggregate's member, recorded but not compared), Write,
//     Rejection, Problem.
//   - overlay.go: the round's writes over the reader, indexed as the
//     reader's table is (key order, type, variable segment, string value);
//     one scan merges an index of both.
//   - match.go, scope.go: solving a scope. plan picks each pattern's access
//     path (a Get, a prefix, an index, a whole-type scan last); join binds
//     the match patterns, then optional and absent ones; complete adds the
//     scope's aggregates and lets. value.go holds bound values (val, both
//     their CEL and their string form) and bindings.
//   - rule.go: a rule under a binding. body solves it and applies the
//     guard; act fires an action's heads when they change anything
//     (drawing fresh ids that no key uses); derive maintains a view,
//     writing what the body derives and deleting, under its heads, what no
//     binding derives any more.
//   - sites.go: where a changed fact can matter (a site): a pattern of a
//     body, of an aggregate or choice (lifted: joined with the rest of its
//     scope to find the body bindings), or a derive head. dispatch turns a
//     change into tasks through them.
//   - choose.go, candidates.go: a choice picks its best candidates by its
//     filters and order, recording a Rejection for every candidate a filter
//     turns down (`ccattler why-not`). A round keeps a choice's candidates
//     while it writes no fact of their types; a bounded choice visits a
//     sample of them, from a start that hashes the binding (sampleStart,
//     scope.go), so the same binding sees the same sample.
//   - aggregates.go: an aggregate's results, one per group, kept at three
//     lifetimes behind one narrow interface: a round asks roundAggs.lookup
//     for a group's result and tells roundAggs.changed of each write;
//     aggregates.end keeps what the round learnt, aggregates.follow brings
//     it to the next round's reader with the changes between.
//     aggadjust.go: within a round, a result is kept until a write could
//     change it, and the round's own writes adjust the groups their fact
//     joins or leaves instead of dropping them: placing I instances on N
//     nodes is not I times N; aggregates with the same match patterns
//     and group (twins: the counts of one counts block) find those
//     members by one join. aggstore.go: across rounds, for Continue
//     alone, a result is kept with every access its computation made to
//     the reader (deps) and dropped, or for a small batch of changes that
//     say what they replaced adjusted, when a change falls in one.
//     aggwhole.go: an aggregate whose groups are all named by its members
//     is, after enough groups computed one at a time, computed for every
//     group in one scan; a group not found then has no member, and it is
//     kept whole across rounds.
//   - waiting.go: a rule that fills a hole (schedule writes the placement
//     its body requires absent) keeps the bindings that found no
//     candidate, so a change to the candidates evaluates those rather than
//     the rule whole. The engine's Uncommitted loses them.
//   - guard.go: a rule's guarded aggregates (guard = true): the members a
//     firing decided on become compared reads, past MaxGuardedReads an
//     ordering after the whole plan (Firing.AfterAll).
//   - carry: WithMaxFirings and WithRoundBudget end a round early; its
//     tasks not yet run are carried to the next call (Plan.More) as its
//     queues, in the order a pass runs them (queue.go), and its first
//     pass starts after the rule the round was cut in (eval.go). A
//     rule past its own budget waits while the others run, and gets
//     another once none has work left (refill), up to the round's bound.
//
// Subpackage ruletest runs rule tests written as data (policies/testdata,
// `ccattler rules test`) against an Evaluator.
//
// Usage:
//
//	ev := eval.New(ruleSet, eval.WithSeed(seed))
//	plan := ev.Full(table) // any facts.Reader: the mirror's view, a facts.Table
//	// commit plan.Firings, then with the changes since table.Rev():
//	plan = ev.Continue(table.Rev(), newer, changes, false)
package eval
