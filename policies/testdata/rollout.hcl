# Rolling replacement (rollout.hcl): new instances first, within
# update/max_extra; an old one stops only when a new one is running and
# healthy; an image whose instances fail or are unhealthy halts the rollout.
test "image change: one new instance first, an old one stopped when it is healthy" {
  seed   = 5
  now    = "2026-11-29T12:00:00Z"
  worlds = [service("web", "nginx:2", 6), node("node-1"), capacity("node-1", 16, "16Gi"),
    serving_image("b0001", "web", "node-1", "nginx:1"),
    serving_image("b0002", "web", "node-1", "nginx:1"),
    serving_image("b0003", "web", "node-1", "nginx:1"),
    serving_image("b0004", "web", "node-1", "nginx:1"),
    serving_image("b0005", "web", "node-1", "nginx:1"),
    serving_image("b0006", "web", "node-1", "nginx:1")]
  facts = {
    "desired/service/web/update/max_extra"       = 1
    "desired/service/web/update/max_unavailable" = 1
    "observed/clock"                             = "2026-11-29T12:00:00Z"
    "observed/instance/b0001/started_at"         = "2026-11-29T10:00:01Z"
    "observed/instance/b0002/started_at"         = "2026-11-29T10:00:02Z"
    "observed/instance/b0003/started_at"         = "2026-11-29T10:00:03Z"
    "observed/instance/b0004/started_at"         = "2026-11-29T10:00:04Z"
    "observed/instance/b0005/started_at"         = "2026-11-29T10:00:05Z"
    "observed/instance/b0006/started_at"         = "2026-11-29T10:00:06Z"
  }
  expect {
    writes = {
      "observed/service/web/rollout" = { image = "nginx:2", updated = 0, total = 6, state = "progressing", reason = "" }
      "observed/instance/*/service"  = "web"
      "observed/instance/*/state"    = "pending"
      "placement/instance/*"         = "node-1"
      "placement/node/node-1/*" = "web"
    }
    firings = { rollout_status = 1, replace_first = 1, schedule = 1 }
  }

  then "the new instance runs healthy on nginx:2: the first old one is stopped" {
    worlds = [report("51e1c", "running", "healthy", "nginx:2")]
    facts  = {
      "observed/instance/51e1c/started_at" = "2026-11-29T12:00:01Z"
    }
    expect {
      writes = {
        "observed/service/web/rollout" = { image = "nginx:2", updated = 1, total = 6, state = "progressing", reason = "" }
      }
      deletes = ["placement/instance/b0001", "placement/node/node-1/b0001"]
      firings = { rollout_status = 1, stop_replaced = 1 }
    }
  }

  then "its agent has stopped it: the next new one is created (never more than 7 containers)" {
    facts = { "observed/instance/b0001/state" = "stopped" }
    expect {
      writes = {
        "observed/instance/*/service"        = "web"
        "observed/instance/*/state"          = "pending"
        "placement/instance/f60d7"           = "node-1"
        "observed/instance/b0001/stopped_at" = "2026-11-29T12:00:00Z"
        "placement/node/node-1/f60d7" = "web"
      }
      firings = { replace_first = 1, schedule = 1, note_stopped = 1 }
    }
  }

  then "the next new one fails to start: the rollout halts, five old ones keep serving" {
    facts = {
      "observed/instance/f60d7/node"   = "node-1"
      "observed/instance/f60d7/state"  = "failed"
      "observed/instance/f60d7/health" = "unknown"
    }
    expect {
      writes = {
        "observed/service/web/rollout"    = { image = "nginx:2", updated = 1, total = 6, state = "halted", reason = "1 instance(s) of nginx:2 failed or are unhealthy; 5 running an older image keep serving" }
        "observed/instance/f60d7/failed_at" = "2026-11-29T12:00:00Z"
        # The restart policy counts the failure and holds new instances a second.
        "observed/service/web/restart/failures"     = 1
        "observed/service/web/restart/last_failure" = "2026-11-29T12:00:00Z"
        "observed/service/web/restart/image"        = "nginx:2"
        "observed/service/web/restart/reason"       = "failed; its agent gave no reason"
        "observed/service/web/restart/hold"         = "2026-11-29T12:00:01Z"
      }
      firings = { rollout_status = 1, note_failed = 1, count_failure = 1 }
    }
  }

  then "59 seconds on: still halted (the restart hold is long over)" {
    now   = "2026-11-29T12:00:59Z"
    facts = { "observed/clock" = "2026-11-29T12:00:59Z" }
    expect {
      deletes = ["observed/service/web/restart/hold"]
      firings = { end_hold = 1 }
    }
  }

  then "a minute on: the failed one is released and the rollout tries again" {
    facts = { "observed/clock" = "2026-11-29T12:01:00Z" }
    expect {
      writes = {
        "observed/service/web/rollout" = { image = "nginx:2", updated = 1, total = 6, state = "progressing", reason = "" }
        "observed/instance/*/service"  = "web"
        "observed/instance/*/state"    = "pending"
        "placement/instance/*"         = "node-1"
        "observed/instance/f60d7/stopped_at" = "2026-11-29T12:01:00Z"
        "placement/node/node-1/*" = "web"
      }
      deletes = ["placement/instance/f60d7", "placement/node/node-1/f60d7"]
      firings = { release_failed = 1, rollout_status = 1, replace_first = 1, schedule = 1, note_stopped = 1 }
    }
  }
}

test "a rollout to the end: the view is gone once no instance runs the old image" {
  seed   = 7
  now    = "2026-11-29T12:00:00Z"
  worlds = [service("api", "api:2", 1), node("node-1"), capacity("node-1", 16, "16Gi"),
    serving_image("c0001", "api", "node-1", "api:1")]
  expect {
    writes = {
      "observed/service/api/rollout" = { image = "api:2", updated = 0, total = 1, state = "progressing", reason = "" }
      "observed/instance/*/service"  = "api"
      "observed/instance/*/state"    = "pending"
      "placement/instance/103a3"     = "node-1"
      "placement/node/node-1/103a3" = "api"
    }
    firings = { rollout_status = 1, replace_first = 1, schedule = 1 }
  }
  then "the new one runs but is not healthy yet: the old one keeps serving" {
    worlds = [report("103a3", "running", "unknown", "api:2")]
    expect {
      firings = {}
    }
  }
  then "healthy: the old one stops and the rollout's view is gone" {
    facts = { "observed/instance/103a3/health" = "healthy" }
    expect {
      deletes = ["placement/instance/c0001", "observed/service/api/rollout", "placement/node/node-1/c0001"]
      firings = { stop_replaced = 1, rollout_status = 1 }
    }
  }
}

test "max_extra = 0: an old one stops first within max_unavailable, the next only when its replacement is healthy" {
  seed   = 9
  now    = "2026-11-29T12:00:00Z"
  worlds = [service("api", "api:2", 2), node("node-1"), capacity("node-1", 16, "16Gi"),
    serving_image("c0001", "api", "node-1", "api:1"),
    serving_image("c0002", "api", "node-1", "api:1")]
  facts = {
    "desired/service/api/update/max_extra"       = 0
    "desired/service/api/update/max_unavailable" = 1
  }
  expect {
    writes = {
      "observed/service/api/rollout" = { image = "api:2", updated = 0, total = 2, state = "progressing", reason = "" }
      "observed/instance/*/service"  = "api"
      "observed/instance/*/state"    = "pending"
      "placement/instance/a87fe"     = "node-1"
      "placement/node/node-1/a87fe" = "api"
    }
    deletes = ["placement/instance/c0001", "placement/node/node-1/c0001"]
    firings = { rollout_status = 1, stop_replaced = 1, create_instances = 1, schedule = 1 }
  }
  then "the replacement runs, not yet healthy: the second old one is not stopped (one unavailable at most)" {
    worlds = [report("a87fe", "running", "unknown", "api:2")]
    expect {
      firings = {}
    }
  }
  then "healthy: the second old one stops and is replaced; no old image runs any more" {
    facts = { "observed/instance/a87fe/health" = "healthy" }
    expect {
      writes = {
        "observed/instance/*/service"  = "api"
        "observed/instance/*/state"    = "pending"
        "placement/instance/*"         = "node-1"
        "placement/node/node-1/*" = "api"
      }
      deletes = ["placement/instance/c0002", "observed/service/api/rollout", "placement/node/node-1/c0002"]
      firings = { rollout_status = 1, stop_replaced = 1, create_instances = 1, schedule = 1 }
    }
  }
}

test "a changed cpu request replaces instances like a changed image; agents that do not say keep theirs" {
  seed   = 19
  now    = "2026-11-29T12:00:00Z"
  # c0002's agent does not report resources: nothing to compare
  worlds = ["api_two_serving"]
  facts  = {
    "desired/service/api/resources/cpu"     = "500m"
    "observed/instance/c0001/resources/cpu" = 0.25
  }
  expect {
    writes = {
      "observed/service/api/rollout" = { image = "api:1", updated = 1, total = 2, state = "progressing", reason = "" }
      "observed/instance/*/service"  = "api"
      "observed/instance/*/state"    = "pending"
      "placement/instance/*"         = "node-1"
      "placement/node/node-1/d96ef" = "api"
    }
    firings = { rollout_status = 1, replace_first = 1, schedule = 1 }
  }
  then "the cpu request goes back to what c0001 runs with: nothing to replace; the new one is waited for" {
    facts = { "desired/service/api/resources/cpu" = 0.25 }
    expect {
      deletes = ["observed/service/api/rollout"]
      firings = { rollout_status = 1 }
    }
  }
  then "once it runs, the newest extra is stopped" {
    worlds = [report("d96ef", "running", "healthy", "api:1")]
    facts  = {
      "observed/instance/d96ef/resources/cpu" = 0.25
      "observed/instance/d96ef/started_at"    = "2026-11-29T12:00:05Z"
    }
    expect {
      deletes = ["placement/instance/d96ef", "placement/node/node-1/d96ef"]
      firings = { stop_placed_extras = 1 }
    }
  }
}

# Three instances on three nodes, one each, replaced one at a time: a new
# one goes beside an old one, not beside a new one, and the old one stopped
# is the one beside it (not the first by id), so the new image ends one to
# a node as the old one was: spreading is the scheduler's promise, and a
# rollout must not undo it.
test "a rollout keeps a service spread: the old instance stopped is the one beside the new" {
  seed = 3
  now  = "2026-11-29T12:00:00Z"
  worlds = [service("web", "nginx:2", 3),
    node("node-1"), capacity("node-1", 16, "16Gi"),
    node("node-2"), capacity("node-2", 16, "16Gi"),
    node("node-3"), capacity("node-3", 16, "16Gi"),
    serving_image("b0001", "web", "node-1", "nginx:1"),
    serving_image("b0003", "web", "node-2", "nginx:1"),
    serving_image("b0002", "web", "node-3", "nginx:1")]
  facts = { "observed/clock" = "2026-11-29T12:00:00Z" }
  expect {
    writes = {
      "observed/service/web/rollout" = { image = "nginx:2", updated = 0, total = 3, state = "progressing", reason = "" }
      "observed/instance/*/service"  = "web"
      "observed/instance/*/state"    = "pending"
      "placement/instance/d1fb2"     = "node-1"
      "placement/node/node-1/d1fb2" = "web"
    }
    firings = { rollout_status = 1, replace_first = 1, schedule = 1 }
  }

  then "the new one runs on node-1: the old one beside it stops" {
    worlds = [report("d1fb2", "running", "healthy", "nginx:2")]
    expect {
      writes  = { "observed/service/web/rollout" = { image = "nginx:2", updated = 1, total = 3, state = "progressing", reason = "" } }
      deletes = ["placement/instance/b0001", "placement/node/node-1/b0001"]
      firings = { rollout_status = 1, stop_replaced = 1 }
    }
  }

  then "stopped: the second new one is placed" {
    facts = { "observed/instance/b0001/state" = "stopped" }
    expect {
      writes = {
        "observed/instance/*/service"        = "web"
        "observed/instance/*/state"          = "pending"
        "placement/instance/eb214"           = "node-2"
        "observed/instance/b0001/stopped_at" = "2026-11-29T12:00:00Z"
        "placement/node/node-2/eb214" = "web"
      }
      firings = { replace_first = 1, schedule = 1, note_stopped = 1 }
    }
  }

  then "the second runs on node-2: the old one beside it stops" {
    worlds = [report("eb214", "running", "healthy", "nginx:2")]
    expect {
      writes  = { "observed/service/web/rollout" = { image = "nginx:2", updated = 2, total = 3, state = "progressing", reason = "" } }
      deletes = ["placement/instance/b0003", "placement/node/node-2/b0003"]
      firings = { rollout_status = 1, stop_replaced = 1 }
    }
  }

  then "stopped: the third goes to node-3, the one node without the new image" {
    facts = { "observed/instance/b0003/state" = "stopped" }
    expect {
      writes = {
        "observed/instance/*/service"        = "web"
        "observed/instance/*/state"          = "pending"
        "placement/instance/*"               = "node-3"
        "observed/instance/b0003/stopped_at" = "2026-11-29T12:00:00Z"
        "placement/node/node-3/*" = "web"
      }
      firings = { replace_first = 1, schedule = 1, note_stopped = 1 }
    }
  }
}
