package eval

// This file is the contract between the evaluator (this package: a RuleSet
// over a facts.Reader -> Plan, pure, knows nothing of etcd) and the engine's
// committer (package engine: Plan -> guarded etcd transactions with firing
// records). Effects are values.

// Read is a fact a firing read, with the ModRevision it had when read.
// Rev 0 means the fact was read as absent (negation, optional pattern, a fresh
// id's keys): the committer guards it with "ModRevision == 0", i.e. still absent.
// Own is set when the value read was written earlier in the same plan
// (read-your-writes): there is no etcd revision to compare yet; the committer
// must commit the earlier firing first (same or earlier transaction) and never
// commit this one if that one failed.
//
// Prefix is set when the read was "no key under the prefix Key exists" (an
// absent pattern with variables no other pattern binds): Rev is 0 and the
// committer guards it with a ranged compare, ModRevision == 0 over the
// prefix (etcd compares every key of the range; an empty range passes).
//
// NoGuard is set for facts read as members of an aggregate (count, sum,
// min, max): they are listed for the firing record (why), but the committer
// must not compare them: a group may hold thousands of facts, and a fact
// joining the group later could not be caught by a compare anyway. The next
// round sees any change and corrects. At most MaxAggregateReads members of
// one aggregate are listed. The members of a guarded aggregate (guard =
// true) are ordinary reads instead, compared (or, Own, ordered) like any
// other, up to MaxGuardedReads of them (see Firing.AfterAll).
type Read struct {
	Key     string
	Rev     int64
	Own     bool
	Prefix  bool
	NoGuard bool
}

// Write is one put (Value != nil) or delete (Value == nil) a firing makes.
// Keys are relative to the store's root; values are canonical JSON, already
// valid for the key's fact type.
type Write struct {
	Key   string
	Value []byte
}

// Firing is one rule firing under one binding: what it read and what it
// writes. Its writes and its firing record commit in one transaction, or not at all.
// Firings are in evaluation order; a later firing may depend on an earlier
// one's writes (its Reads then have Own set for those keys). A Firing's Reads
// include every key it writes, with the revision it had (0: absent), so that
// a concurrent write to a target fails the compare. A fresh id's keys are
// read with Rev 0: "created only if absent".
type Firing struct {
	Rule string // rule name
	// Bindings maps each variable to its value as a string: path segments,
	// value aliases (strings as is, other values as canonical JSON), the
	// chosen candidate's variables, a fresh id, aggregates and lets.
	Bindings map[string]string
	Reads    []Read
	Writes   []Write
	// Kind is "derive" (maintaining a view: puts of derived keys, deletes of
	// keys no longer derived) or "emit" (an action: emit and delete heads).
	Kind string
	// AfterAll is set when the firing read a guarded aggregate (guard =
	// true) with more member facts than MaxGuardedReads: they are not
	// listed, and the committer must commit it only if every firing before
	// it in the plan committed (none was dropped as stale, orphaned or
	// refused), so that no write of the round it counted has failed.
	AfterAll bool
}

// Rejection records why a choice passed over a candidate, for `why-not`.
// A binding evaluated several times in a round keeps its last rejection of
// each candidate; rejections are recorded whether or not the binding then
// fired with another candidate.
type Rejection struct {
	Rule      string
	Bindings  map[string]string // the binding being placed, e.g. {"id": "a8f31", "svc": "web", ...}
	Candidate map[string]string // the candidate's variables, e.g. {"node": "node-2"}
	Filters   []string          // names of every filter the candidate failed
}

// Problem is a rule that could not be evaluated this round: over its CEL cost
// budget, a runtime error, a recovered panic, an oscillation, no fixpoint
// within the round's passes. The round goes on without it (a rule that
// oscillated is evaluated again from the start without it, so none of its
// writes are in the plan). Two cases report without stopping the rule: a
// run-time error in one binding of an action (that binding is skipped, the
// error names it), and a fresh count over the limit.
type Problem struct {
	Rule string
	Err  error
}

func (p Problem) Error() string { return "rule " + p.Rule + ": " + p.Err.Error() }

// Plan is the result of one evaluation round.
type Plan struct {
	RuleSetVersion string // hash of the rule set that produced it
	Rev            int64  // the mirror revision evaluated against
	Firings        []Firing
	Rejections     []Rejection
	Problems       []Problem
	// More is set when the round stopped at its firing budget
	// (WithMaxFirings) with tasks left: the evaluator's next call runs
	// them, whether or not facts changed meanwhile.
	More bool
}
