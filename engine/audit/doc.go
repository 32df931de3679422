// Package audit answers the auditor's questions from the firing records
// under event/: which records match a filter (`ccattler events`), and why a
// fact holds (`ccattler why KEY`).
//
// Every engine write is committed in the same transaction as its record, so
// the record that explains a fact is the one whose ModRevision equals the
// fact's. Why walks from a fact to that record, then to each fact the firing
// read (at the revision it read), down to facts written by a user's apply or
// reported by an agent:
//
//	tree, err := audit.Why(ctx, store, "endpoint/service/web/a8f31", audit.WhyOptions{})
//	audit.PrintTree(os.Stdout, tree)
package audit
