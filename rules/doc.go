// Package rules loads HCL rule files into a compiled, type-checked RuleSet.
//
// A rule is a conjunction of fact patterns over key templates whose
// {variables} bind path segments and whose aliases bind decoded values;
// guards and values are CEL, compiled once and type-checked against the
// fact schema (a fact the schema says is an int is an int in CEL). Every
// problem of every file is reported in one pass as hcl.Diagnostics, with
// CEL errors mapped back to the file's line and column.
//
// A short tour:
//
//	rs, files, diags := rules.LoadWithFiles("policies/") // parse, compile, check, stratify
//	if diags.HasErrors() {
//		rules.WriteDiagnostics(os.Stderr, files, diags)  // file:line:col, the line, a caret
//	}
//	for _, r := range rs.Rules { ... }                   // stratified order: dependencies first
//
// Top-level aggregate, counts, relation, let and const blocks are shared
// definitions (shared.go): any rule of the set reads one by name. A shared
// aggregate is compiled once per set of param types, so every rule reading
// it holds the same *Aggregate and the evaluator computes its groups once;
// lets are inlined where they are read. A top-level action block names
// heads several rules take with a do block (action.go): they are compiled
// into each such rule, its params inlined. A delete head ending in "/" stands
// for a delete per key form under it (prefix.go). A summary block is a rule
// for people (summary.go): derive heads only, read by no rule, last in the
// order; RuleSet.WithoutSummaries is the set a rule test runs by default.
//
// Compiled CEL programs live in a ristretto cache (DefaultCache) keyed by
// expression, environment and cost limit, so a reload recompiles only the
// expressions that changed.
//
// The language reference for rule authors is docs/rules.md; package
// engine/eval evaluates a RuleSet over facts.
package rules
