# Health replacement (health.hcl, then rollout.hcl): an instance unhealthy
# for health/failures consecutive checks is replaced, a new one first; a
# healthy check in between starts the count again; failed instances are
# replaced and released.
test "unhealthy for 3 checks of 5s: replaced, new instance first" {
  seed   = 11
  now    = "2026-11-29T12:00:00Z"
  worlds = [service("web", "nginx:1", 3), node("node-1"), capacity("node-1", 16, "16Gi"),
    serving_image("d0001", "web", "node-1", "nginx:1"),
    serving_image("d0002", "web", "node-1", "nginx:1"),
    serving_image("d0003", "web", "node-1", "nginx:1"), address("d0001", "node-1", "10.1.0.5"),
    address("d0002", "node-1", "10.1.0.5"), address("d0003", "node-1", "10.1.0.5")]
  facts = {
    "observed/node/node-1/address"        = "10.1.0.5"
    "desired/service/web/expose/8080"     = {}
    "desired/service/web/health/failures" = 3
    "desired/service/web/health/interval" = "5s"
    "observed/clock"                      = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      "endpoint/service/web/d0001" = { ip = "10.1.0.5", port = 8080 }
      "endpoint/service/web/d0002" = { ip = "10.1.0.5", port = 8080 }
      "endpoint/service/web/d0003" = { ip = "10.1.0.5", port = 8080 }
    }
    firings = { publish_endpoint = 3 }
  }

  then "d0002 reports unhealthy: its endpoint is removed and the policy notes since when" {
    facts = { "observed/instance/d0002/health" = "unhealthy" }
    expect {
      writes  = { "observed/instance/d0002/unhealthy_since" = "2026-11-29T12:00:00Z" }
      deletes = ["endpoint/service/web/d0002"]
      firings = { note_unhealthy = 1, publish_endpoint = 1 }
    }
  }

  then "a healthy check in between: the count starts again" {
    facts = {
      "observed/instance/d0002/health" = "healthy"
      "observed/clock"                 = "2026-11-29T12:00:05Z"
    }
    expect {
      writes  = { "endpoint/service/web/d0002" = { ip = "10.1.0.5", port = 8080 } }
      deletes = ["observed/instance/d0002/unhealthy_since"]
      firings = { forget_unhealthy = 1, publish_endpoint = 1 }
    }
  }

  then "unhealthy again" {
    facts = { "observed/instance/d0002/health" = "unhealthy" }
    expect {
      writes  = { "observed/instance/d0002/unhealthy_since" = "2026-11-29T12:00:00Z" }
      deletes = ["endpoint/service/web/d0002"]
      firings = { note_unhealthy = 1, publish_endpoint = 1 }
    }
  }

  then "9.999 seconds on (the second check failed too): not yet" {
    facts = { "observed/clock" = "2026-11-29T12:00:09.999Z" }
    expect {
      firings = {}
    }
  }

  then "10 seconds on (the third check): retiring; a new instance is created first" {
    facts = { "observed/clock" = "2026-11-29T12:00:10Z" }
    expect {
      writes = {
        "observed/instance/d0002/retiring" = "unhealthy"
        "observed/instance/*/service"      = "web"
        "observed/instance/*/state"        = "pending"
        "placement/instance/11e84"         = "node-1"
        "placement/node/node-1/11e84" = "web"
      }
      firings = { retire_unhealthy = 1, replace_first = 1, schedule = 1 }
    }
  }

  then "the new one runs healthy: the unhealthy one is stopped, the new one serves" {
    worlds = [address("11e84", "node-1", "10.1.0.5"),
      report("11e84", "running", "healthy", "nginx:1")]
    expect {
      writes  = { "endpoint/service/web/11e84" = { ip = "10.1.0.5", port = 8080 } }
      deletes = ["placement/instance/d0002", "placement/node/node-1/d0002"]
      firings = { stop_replaced = 1, publish_endpoint = 1 }
    }
  }

  then "d0003 fails: released so its agent removes it; its replacement waits a second (restart.hcl)" {
    facts = {
      "observed/instance/d0003/state"  = "failed"
      "observed/instance/d0003/health" = "unknown"
    }
    expect {
      writes = {
        "observed/instance/d0003/failed_at"         = "2026-11-29T12:00:00Z"
        "observed/instance/d0003/stopped_at"        = "2026-11-29T12:00:10Z"
        "observed/service/web/restart/failures"     = 1
        "observed/service/web/restart/last_failure" = "2026-11-29T12:00:00Z"
        "observed/service/web/restart/image"        = "nginx:1"
        "observed/service/web/restart/reason"       = "failed; its agent gave no reason"
        "observed/service/web/restart/hold"         = "2026-11-29T12:00:01Z"
      }
      deletes = ["endpoint/service/web/d0003", "placement/instance/d0003", "placement/node/node-1/d0003"]
      firings = { note_failed = 1, count_failure = 1, release_failed = 1, publish_endpoint = 1, note_stopped = 1 }
    }
  }

  then "a second later the hold is over: d0003 is replaced" {
    now = "2026-11-29T12:00:01Z"
    expect {
      writes = {
        "observed/instance/*/service" = "web"
        "observed/instance/*/state"   = "pending"
        "placement/instance/*"        = "node-1"
        "placement/node/node-1/*" = "web"
      }
      deletes = ["observed/service/web/restart/hold"]
      firings = { end_hold = 1, create_instances = 1, schedule = 1 }
    }
  }
}

test "with max_extra = 0 an unhealthy instance is stopped first, then replaced" {
  seed   = 13
  now    = "2026-11-29T12:00:00Z"
  worlds = [service("web", "nginx:1", 2), node("node-1"), capacity("node-1", 16, "16Gi"),
    serving_image("e0001", "web", "node-1", "nginx:1"),
    placed("e0002", "web", "running", "node-1")]
  facts = {
    "desired/service/web/update/max_extra"    = 0
    "observed/clock"                          = "2026-11-29T12:00:30Z"
    "observed/instance/e0002/health"          = "unhealthy"
    "observed/instance/e0002/image"           = "nginx:1"
    "observed/instance/e0002/unhealthy_since" = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      "observed/instance/e0002/retiring" = "unhealthy"
      "observed/instance/*/service"      = "web"
      "observed/instance/*/state"        = "pending"
      "placement/instance/*"             = "node-1"
      "placement/node/node-1/*" = "web"
    }
    deletes = ["placement/instance/e0002", "placement/node/node-1/e0002"]
    firings = { retire_unhealthy = 1, stop_replaced = 1, create_instances = 1, schedule = 1 }
  }
}
