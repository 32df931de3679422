# Stopping extras: every extra of a service in one round (choose's pick),
# ranked by a sort key list (order), on counts the commit guards (guard).

test "scale 8 -> 2: every extra stopped in one round, unhealthy first, then the newest" {
  worlds = [node("node-1"), node("node-2"), capacity("node-1", 8, "8Gi"),
    capacity("node-2", 8, "8Gi"), serving("a0001", "web", "node-1"),
    serving("a0002", "web", "node-2"), placed("a0003", "web", "running", "node-1"),
    serving("a0004", "web", "node-2"), placed("a0005", "web", "running", "node-1"),
    serving("a0006", "web", "node-2"), serving("a0007", "web", "node-1"),
    serving("a0008", "web", "node-2")]
  facts = {
    "desired/service/web"                = {}
    "intent/user/service/web/instances"  = 2
    "effective/service/web/instances"    = 8
    "observed/instance/a0001/started_at" = "2026-11-29T09:00:00Z"
    "observed/instance/a0002/started_at" = "2026-11-29T09:10:00Z"
    "observed/instance/a0003/health"     = "unhealthy"
    "observed/instance/a0003/started_at" = "2026-11-29T08:00:00Z"
    "observed/instance/a0004/started_at" = "2026-11-29T09:30:00Z"
    "observed/instance/a0005/health"     = "unhealthy"
    "observed/instance/a0005/started_at" = "2026-11-29T08:30:00Z"
    "observed/instance/a0006/started_at" = "2026-11-29T09:50:00Z"
    "observed/instance/a0007/started_at" = "2026-11-29T10:00:00Z"
    "observed/instance/a0008/started_at" = "2026-11-29T10:10:00Z"
  }
  expect {
    writes = {
      "effective/service/web/instances"         = 2
      "observed/instance/a0003/unhealthy_since" = "2026-11-29T12:00:00Z"
      "observed/instance/a0005/unhealthy_since" = "2026-11-29T12:00:00Z"
    }
    # the two longest-running healthy ones stay
    deletes = [
      "placement/instance/a0003", "placement/instance/a0004", "placement/instance/a0005",
      "placement/instance/a0006", "placement/instance/a0007", "placement/instance/a0008",
      "placement/node/node-1/a0003", "placement/node/node-1/a0005", "placement/node/node-1/a0007", "placement/node/node-2/a0004", "placement/node/node-2/a0006", "placement/node/node-2/a0008",
    ]
    firings = { resolve_intent = 1, stop_placed_extras = 6, note_unhealthy = 2 }
    rounds  = { stop_placed_extras = 1 }
  }
  then "scaled to 0: the rest at once, the last healthy one too" {
    facts = { "intent/user/service/web/instances" = 0 }
    expect {
      writes  = { "effective/service/web/instances" = 0 }
      deletes = ["placement/instance/a0001", "placement/instance/a0002", "placement/node/node-1/a0001", "placement/node/node-2/a0002"]
      firings = { resolve_intent = 1, stop_placed_extras = 2 }
      rounds  = { stop_placed_extras = 1 }
    }
  }
}

test "the only healthy instance stays, the newest though it is: three of four stopped at once" {
  worlds = [node("node-1"), capacity("node-1", 8, "8Gi"),
    placed("a0001", "web", "running", "node-1"), placed("a0002", "web", "running", "node-1"),
    placed("a0003", "web", "running", "node-1"), serving("a0004", "web", "node-1")]
  facts = {
    "desired/service/web"                = {}
    "intent/user/service/web/instances"  = 1
    "effective/service/web/instances"    = 1
    "observed/instance/a0001/health"     = "unhealthy"
    "observed/instance/a0001/started_at" = "2026-11-29T08:00:00Z"
    "observed/instance/a0002/started_at" = "2026-11-29T08:10:00Z"
    "observed/instance/a0003/health"     = "unhealthy"
    "observed/instance/a0003/started_at" = "2026-11-29T08:20:00Z"
    "observed/instance/a0004/started_at" = "2026-11-29T11:00:00Z"
  }
  expect {
    writes = {
      "observed/instance/a0001/unhealthy_since" = "2026-11-29T12:00:00Z"
      "observed/instance/a0003/unhealthy_since" = "2026-11-29T12:00:00Z"
    }
    deletes = ["placement/instance/a0001", "placement/instance/a0002", "placement/instance/a0003", "placement/node/node-1/a0001", "placement/node/node-1/a0002", "placement/node/node-1/a0003"]
    firings = { stop_placed_extras = 3, note_unhealthy = 2 }
    rounds  = { stop_placed_extras = 1 }
  }
}

test "a frozen node returns: its originals stay, every replacement is stopped in the round it is back" {
  worlds = [node("node-2"), capacity("node-1", 8, "8Gi"), capacity("node-2", 8, "8Gi"),
    serving("a0001", "web", "node-1"), serving("a0002", "web", "node-1"),
    serving("a0003", "web", "node-1"), serving("b0001", "web", "node-2"),
    serving("b0002", "web", "node-2"), serving("b0003", "web", "node-2")]
  facts = {
    "desired/service/web"                = {}
    "intent/user/service/web/instances"  = 3
    "effective/service/web/instances"    = 3
    "observed/node/node-1/state"         = "unreachable"
    "observed/node/node-1/leased"        = true
    "lease/node/node-1"                  = {}
    "observed/instance/a0001/started_at" = "2026-11-29T08:00:00Z"
    "observed/instance/a0002/started_at" = "2026-11-29T08:00:00Z"
    "observed/instance/a0003/started_at" = "2026-11-29T08:05:00Z"
    "observed/instance/b0001/started_at" = "2026-11-29T11:00:00Z"
    "observed/instance/b0002/started_at" = "2026-11-29T11:00:01Z"
    "observed/instance/b0003/started_at" = "2026-11-29T11:00:02Z"
  }
  expect {
    writes  = { "observed/node/node-1/state" = "alive" }
    deletes = ["placement/instance/b0001", "placement/instance/b0002", "placement/instance/b0003", "placement/node/node-2/b0001", "placement/node/node-2/b0002", "placement/node/node-2/b0003"]
    firings = { node_returns = 1, stop_placed_extras = 3 }
    rounds  = { stop_placed_extras = 1 }
  }
}

test "unplaced pending extras are cancelled all at once" {
  worlds = [instance("a0001", "web", "pending"), instance("a0002", "web", "pending"),
    instance("a0003", "web", "pending"), instance("a0004", "web", "pending"),
    instance("a0005", "web", "pending")]
  facts = {
    "desired/service/web"               = {}
    "intent/user/service/web/instances" = 1
    "effective/service/web/instances"   = 1
  }
  expect {
    writes = { "observed/instance/*/state" = ["stopped", "stopped", "stopped", "stopped"] }
    firings = { cancel_waiting_extras = 4 }
    rounds  = { cancel_waiting_extras = 1 }
  }
}
