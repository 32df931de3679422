// Package whatif answers "what would this rule set do differently?" without
// writing anything: `ccattler rules plan`, the terraform plan of controller
// logic.
//
// Compare runs two rule sets — the running one and a candidate — each on
// its own in-memory copy of the same facts, to a fixpoint: each plan's
// writes are applied to the copy and the changes evaluated again, as the
// engine would (without agents: what rules do, not what nodes report). The
// result is every key whose final value differs between the two, with the
// rule that wrote it. Both evaluators draw fresh ids from the same seed, so
// rules the two sets share create the same ids and do not show up as
// differences.
//
//	d := whatif.Compare(snapshot, rev, running, candidate, whatif.Options{})
//	for _, c := range d.Changes { fmt.Println(c.Op, c.Key, c.Rule) }
package whatif
