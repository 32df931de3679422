test "a stopped instance's placement is deleted" {
  facts = {
    "observed/instance/a8f31/state" = "running"
    "placement/instance/a8f31"      = "node-1"
    "observed/instance/b72c9/state" = "stopped"
    "placement/instance/b72c9"      = "node-2"
  }
  expect {
    deletes = ["placement/instance/b72c9"]
    firings = { unplace_stopped = 1 }
  }
  then "the other stops" {
    facts = { "observed/instance/a8f31/state" = "stopped" }
    expect {
      deletes = ["placement/instance/a8f31"]
    }
  }
}
