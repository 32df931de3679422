test "an oscillating pair is stopped by name; the round goes on" {
  facts = {
    "observed/node/node-1/state"       = "alive"
    "intent/user/service/web/instances" = 3
  }
  expect {
    writes   = { "effective/service/web/instances" = 3 }
    problems = ["drain", "undrain"]
    firings  = { bystander = 1 }
  }
}
