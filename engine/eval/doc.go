// Package eval evaluates a compiled rule set against a snapshot of facts and
// returns a Plan of writes, each with the facts it read. It is pure: it knows
// nothing of etcd; package engine commits its plans.
package eval
