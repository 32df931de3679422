// Package ruletest runs rule tests written as data: a test file (HCL) gives
// facts, the rule set runs to a fixpoint on a facts.Table, and the test
// states the expected writes (keys and values, '*' for a fresh id), deletes,
// firings per rule, problems and choice rejections. Later `then` steps
// change facts and run incrementally. `ccattler rules test DIR` and the Go
// tests of the evaluator both run them. The rule set's summaries (rules for
// people, which no rule reads) run only in a test that says
// summaries = true.
//
// Facts many tests share are written once as worlds (worlds.go): a
// top-level world block, with params if it is included like a function
// call, that a test or step names in worlds = [...]; its own facts win.
// The worlds of a directory's test files are shared by all of them.
//
//	test "an endpoint for a running, healthy instance" {
//	  facts = {
//	    "desired/service/web/expose/8080" = {}
//	    "observed/instance/a8f31/service" = "web"
//	    "observed/instance/a8f31/state"   = "running"
//	  }
//	  expect {
//	    writes  = { "endpoint/service/web/a8f31" = { ip = "10.1.0.5", port = 8080 } }
//	    firings = { publish_endpoint = 1 }
//	  }
//	  then "it stops" {
//	    facts  = { "observed/instance/a8f31/state" = "stopped" }
//	    expect { deletes = ["endpoint/service/web/a8f31"] }
//	  }
//	}
package ruletest
