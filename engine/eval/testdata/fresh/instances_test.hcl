test "seeded draws are reproducible" {
  seed  = 7
  facts = { "desired/service/web/instances" = 2 }
  expect {
    writes = {
      "observed/instance/103a3/service" = "web"
      "observed/instance/103a3/state"   = "pending"
      "observed/instance/ef924/service" = "web"
      "observed/instance/ef924/state"   = "pending"
    }
    firings = { create_instances = 2 }
  }
}

test "an id that already exists is skipped and redrawn" {
  seed  = 7
  facts = {
    "desired/service/web/instances"   = 2
    # the first two ids seed 7 draws are taken: one by a whole instance,
    # one by a lone fact under the id
    "observed/instance/103a3/service" = "old"
    "observed/instance/103a3/state"   = "stopped"
    "observed/instance/ef924/state"   = "failed"
  }
  expect {
    writes = {
      "observed/instance/0b989/service" = "web"
      "observed/instance/0b989/state"   = "pending"
      "observed/instance/c1dde/service" = "web"
      "observed/instance/c1dde/state"   = "pending"
    }
    firings = { create_instances = 2 }
  }
}
