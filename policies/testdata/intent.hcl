test "precedence: user, then autoscaler within its bounds, then a policy override" {
  facts = {
    "desired/service/web"               = {}
    "intent/user/service/web/instances" = 3
  }
  expect {
    writes = {
      "effective/service/web/instances" = 3
      "observed/instance/*/service"     = "web"
      "observed/instance/*/state"       = "pending"
    }
    firings = { resolve_intent = 1, create_instances = 3 }
  }
  then "the autoscaler's wish is ignored while the service does not autoscale" {
    facts = { "intent/autoscaler/service/web/instances" = 50 }
    expect {
      firings = {}
    }
  }
  then "with autoscaling declared, the wish is clamped to max" {
    facts = {
      "desired/service/web/autoscale/metric" = "cpu"
      "desired/service/web/autoscale/min"    = 2
      "desired/service/web/autoscale/max"    = 10
    }
    expect {
      writes = {
        "effective/service/web/instances" = 10
        "observed/instance/*/service"     = "web"
        "observed/instance/*/state"       = "pending"
      }
      firings = { resolve_intent = 1, create_instances = 7 }
    }
  }
  then "and to min" {
    facts = { "intent/autoscaler/service/web/instances" = 1 }
    expect {
      # the waiting (unplaced) extras are cancelled first
      writes = {
        "effective/service/web/instances" = 2
        "observed/instance/*/state"       = "stopped"
      }
      firings = { resolve_intent = 1, cancel_waiting_extras = 8 }
    }
  }
  then "a policy intent overrides everything" {
    facts = { "intent/policy/service/web/instances" = 0 }
    expect {
      writes = {
        "effective/service/web/instances" = 0
        "observed/instance/*/state"       = "stopped"
      }
      firings = { resolve_intent = 1, cancel_waiting_extras = 2 }
    }
  }
}

test "scale 3 -> 1 -> 5: the newest go first, then new ones are created" {
  seed   = 3
  worlds = [node("node-1"), capacity("node-1", 8, "8Gi"), serving("a0001", "web", "node-1"),
    serving("a0002", "web", "node-1"), placed("a0003", "web", "running", "node-1")]
  facts = {
    "desired/service/web"                = {}
    "intent/user/service/web/instances"  = 1
    "effective/service/web/instances"    = 3
    "observed/instance/a0001/started_at" = "2026-11-29T10:00:00Z"
    "observed/instance/a0002/started_at" = "2026-11-29T10:05:00Z"
    "observed/instance/a0003/health"     = "unhealthy"
    "observed/instance/a0003/started_at" = "2026-11-29T09:00:00Z"
  }
  expect {
    writes = {
      "effective/service/web/instances" = 1
      # the health policy notes when it first saw a0003 unhealthy (health.hcl)
      "observed/instance/a0003/unhealthy_since" = "2026-11-29T12:00:00Z"
    }
    # the unhealthy one first, then the newer healthy one: the longest-running healthy one stays
    deletes = ["placement/instance/a0002", "placement/instance/a0003", "placement/node/node-1/a0002", "placement/node/node-1/a0003"]
    firings = { resolve_intent = 1, stop_placed_extras = 2, note_unhealthy = 1 }
  }
  then "scale up to 5: four new instances next to the one left" {
    facts = { "intent/user/service/web/instances" = 5 }
    expect {
      writes = {
        "effective/service/web/instances" = 5
        "observed/instance/*/service"     = "web"
        "observed/instance/*/state"       = "pending"
        "placement/instance/*"            = "node-1"
        "placement/node/node-1/*" = ["web", "web", "web", "web"]
      }
      firings = { resolve_intent = 1, create_instances = 4, schedule = 4 }
    }
  }
}
