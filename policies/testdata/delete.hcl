# A deleted service is gone (delete.hcl); scaling to 0 stops everything.
test "delete a service: placements released, endpoints gone, the pending one cancelled, never placed" {
  worlds = [node("node-1"), capacity("node-1", 4, "8Gi"), serving("a0001", "web", "node-1"),
    serving("a0002", "web", "node-1"), instance("a0003", "web", "pending"),
    address("a0001", "node-1", "10.1.0.5"), address("a0002", "node-1", "10.1.0.6")]
  facts = {
    "observed/clock"                    = "2026-11-29T12:00:00Z"
    "observed/node/node-1/address"      = "10.1.0.5"
    "desired/service/web"               = {}
    "desired/service/web/image"         = "nginx:1.28"
    "desired/service/web/instances"     = 3
    "desired/service/web/resources/cpu" = 2
    "desired/service/web/expose/8080"   = {}
    "intent/user/service/web/instances" = 3
  }
  expect {
    writes = {
      "effective/service/web/instances" = 3
      "endpoint/service/web/a0001"      = { ip = "10.1.0.5", port = 8080 }
      "endpoint/service/web/a0002"      = { ip = "10.1.0.5", port = 8080 } # the node's address
    }
    # a0003 does not fit: two instances of 2 cpu fill the node
    rejections = ["schedule node=node-1: cpu"]
    firings    = { resolve_intent = 1, publish_endpoint = 2 }
  }

  then "ccattler delete service web" {
    delete = [
      "desired/service/web", "desired/service/web/image", "desired/service/web/instances",
      "desired/service/web/resources/cpu", "desired/service/web/expose/8080", "intent/user/service/web/instances",
    ]
    expect {
      writes = { "observed/instance/a0003/state" = "stopped", "observed/instance/a0003/stopped_at" = "2026-11-29T12:00:00Z" }
      deletes = [
        "effective/service/web/instances",
        "placement/instance/a0001", "placement/instance/a0002",
        "endpoint/service/web/a0001", "endpoint/service/web/a0002",
        "placement/node/node-1/a0001", "placement/node/node-1/a0002",
      ]
      firings = { resolve_intent = 1, stop_deleted = 2, cancel_deleted = 1, publish_endpoint = 2, note_stopped = 1 }
    }
  }

  then "the agent stops them: history, collected like any stopped instance" {
    facts = {
      "observed/instance/a0001/state"  = "stopped"
      "observed/instance/a0001/health" = "unknown"
      "observed/instance/a0002/state"  = "stopped"
      "observed/instance/a0002/health" = "unknown"
    }
    expect {
      writes = {
        "observed/instance/a0001/stopped_at" = "2026-11-29T12:00:00Z"
        "observed/instance/a0002/stopped_at" = "2026-11-29T12:00:00Z"
      }
      firings = { note_stopped = 2 }
    }
  }

  then "a pending instance reported for the deleted service later is cancelled, not placed" {
    worlds = [instance("a0004", "web", "pending")]
    expect {
      writes  = { "observed/instance/a0004/state" = "stopped", "observed/instance/a0004/stopped_at" = "2026-11-29T12:00:00Z" }
      firings = { cancel_deleted = 1, note_stopped = 1 }
    }
  }
}

test "scale to 0: every instance stopped, the pending one cancelled" {
  worlds = [node("node-1"), capacity("node-1", 4, "8Gi"), serving("a0001", "web", "node-1"),
    serving("a0002", "web", "node-1"), instance("a0003", "web", "pending")]
  facts = {
    "desired/service/web"                = {}
    "desired/service/web/image"          = "nginx:1.28"
    "desired/service/web/resources/cpu"  = 2
    "intent/user/service/web/instances"  = 0
    "observed/instance/a0001/started_at" = "2026-11-29T10:00:00Z"
    "observed/instance/a0002/started_at" = "2026-11-29T11:00:00Z"
  }
  expect {
    writes  = { "effective/service/web/instances" = 0, "observed/instance/a0003/state" = "stopped" }
    deletes = ["placement/instance/a0001", "placement/instance/a0002", "placement/node/node-1/a0001", "placement/node/node-1/a0002"]
    firings = { resolve_intent = 1, cancel_waiting_extras = 1, stop_placed_extras = 2 }
  }
}

test "a node's cache problem is recorded by the engine and the report removed" {
  facts = {
    "observed/node/node-1/cache_error" = "cache file node-1.cache: checksum mismatch"
  }
  expect {
    deletes = ["observed/node/node-1/cache_error"]
    firings = { record_cache_error = 1 }
  }
}
