test "a failing rule is reported by name and the others run" {
  facts = {
    "intent/user/service/web/instances" = 3
    "observed/instance/a8f31/state"     = "pending"
    "observed/instance/a8f31/service"   = "web"
  }
  expect {
    writes   = { "placement/instance/a8f31" = "node-1" }
    problems = ["divide", "bad_value"]
    firings  = { fine = 1 }
  }
}
