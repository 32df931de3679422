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

test "an action skips the binding that fails and places the others" {
  facts = {
    "observed/instance/b0001/state"   = "running"
    "observed/instance/b0001/service" = "web"
    "observed/instance/b0002/state"   = "running"
    "observed/instance/b0002/service" = "shop"
  }
  expect {
    writes   = { "placement/instance/b0002" = "node-2" }
    problems = ["place_some", "bad_value"]
    firings  = { place_some = 1 }
  }
}
