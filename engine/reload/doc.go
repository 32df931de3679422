// Package reload replaces a running engine's rule set without a restart.
//
// A tour:
//
//   - reloader.go: Reloader loads a rule directory (or the built-in files)
//     completely — parse, CEL type-check, set-wide checks — and only then
//     hands the new set to the engine (engine.Engine.Swap), which takes it
//     between two rounds. A set with any error is rejected: its diagnostics
//     (file:line:col with a caret) are logged, kept in the status and
//     recorded under event/ (rule "reload", kind "reload-rejected"), and the
//     old set keeps running. A set whose version hash is the running one
//     changes nothing.
//   - watch.go: --watch polls the directory's rule files every Poll and
//     reloads once a change has held still for one poll (editors write a
//     file in several steps).
//   - control.go: the control channel in etcd, outside the fact root (the
//     mirror never sees it): `ccattler rules reload` puts a request under
//     {root}-ctl/reload; every server answers in its status key
//     {root}-ctl/status/{server}, held on a lease so that a stopped server's
//     status goes with it. `ccattler rules status` reads those keys.
//
// Usage:
//
//	r := reload.New(reload.Config{Dir: dir, Store: store, Identity: id,
//		Install: func(rs *rules.RuleSet) { eng.Swap(engine.NewRuleSetEvaluator(rs, log)) }}, rs)
//	go r.Run(ctx) // answers requests, watches Dir when Watch is set
//	res := r.Reload(ctx, "signal", "")
package reload
