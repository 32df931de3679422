test "min, max and sum over a group; empty groups" {
  facts = {
    "desired/service/web"                     = {}
    "intent/user/service/web/instances"       = 3
    "intent/autoscaler/service/web/instances" = 5
    "intent/policy/service/web/instances"     = 4
    "desired/service/db"                      = {}
  }
  expect {
    writes = {
      # max 5 + min 3 + sum without policy (3 + 5)
      "effective/service/web/instances" = 16
      # no intents: max and min are empty, sum is 0
      "effective/service/db/instances"  = 0
    }
  }
  then "the autoscaler's intent goes" {
    delete = ["intent/autoscaler/service/web/instances"]
    expect {
      writes = { "effective/service/web/instances" = 10 }
    }
  }
}

test "time arithmetic against now" {
  now = "2026-11-29T12:00:00Z"
  facts = {
    "observed/instance/a0001/state"      = "stopped"
    "observed/instance/a0001/started_at" = "2026-11-29T10:00:00Z"
    "observed/instance/a0002/state"      = "stopped"
    "observed/instance/a0002/started_at" = "2026-11-29T11:30:00Z"
    "observed/instance/a0003/state"      = "running"
    "observed/instance/a0003/started_at" = "2026-11-29T09:00:00Z"
  }
  expect {
    deletes = ["observed/instance/a0001/state", "observed/instance/a0001/started_at"]
    firings = { gc_stopped = 1 }
  }
}
