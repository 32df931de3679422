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
type Read struct {
	Key string
	Rev int64
	Own bool
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
type Firing struct {
	Rule     string            // rule name
	Bindings map[string]string // variable -> value (path segments and value aliases, as strings)
	Reads    []Read
	Writes   []Write
	// Kind is "derive" (maintaining a view: puts of derived keys, deletes of
	// keys no longer derived) or "emit" (an action).
	Kind string
}

// Rejection records why a choice passed over a candidate, for `why-not`.
type Rejection struct {
	Rule      string
	Bindings  map[string]string // the binding being placed, e.g. {"id": "a8f31"}
	Candidate map[string]string // the candidate's variables, e.g. {"node": "node-2"}
	Filters   []string          // names of every filter the candidate failed
}

// Problem is a rule that could not be evaluated this round: over its CEL cost
// budget, a runtime error, a recovered panic, or an oscillation. The round goes on without it.
type Problem struct {
	Rule string
	Err  error
}

// Plan is the result of one evaluation round.
type Plan struct {
	RuleSetVersion string // hash of the rule set that produced it
	Rev            int64  // the mirror revision evaluated against
	Firings        []Firing
	Rejections     []Rejection
	Problems       []Problem
}
