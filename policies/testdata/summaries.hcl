# Summaries (summaries.hcl): observed/service/{svc}/summary counts what
# `ccattler get services` shows. A test runs summaries only when it says
# summaries = true; the others assert the rules' writes alone.

# Three instances of web on node-1: one serving, one running unhealthy,
# one pending.
world "web_one_of_each" {
  worlds = [service("web", "nginx:2", 3), node("node-1"), capacity("node-1", 16, "16Gi"),
    serving_image("a0001", "web", "node-1", "nginx:2"),
    placed("a0002", "web", "running", "node-1"), placed("a0003", "web", "pending", "node-1")]
  facts = {
    "observed/node/node-1/address"   = "10.1.0.5"
    "desired/service/web/instances"  = 3
    "observed/instance/a0001/node"   = "node-1"
    "observed/instance/a0002/health" = "unhealthy"
    "observed/instance/a0002/image"  = "nginx:2"
    "observed/instance/a0002/node"   = "node-1"
  }
}
test "a service's summary counts running, healthy and updated instances" {
  summaries = true
  worlds    = ["web_one_of_each"]
  expect {
    writes = {
      "observed/service/web/summary"            = { running = 2, healthy = 1, updated = 1, target = 3 }
      "observed/instance/a0002/unhealthy_since" = "2026-11-29T12:00:00Z"
    }
    firings = { service_summary = 1, note_unhealthy = 1 }
  }

  then "a0003 runs, healthy, before it reports an image: running and healthy, not yet updated" {
    facts = {
      "observed/instance/a0003/state"  = "running"
      "observed/instance/a0003/health" = "healthy"
      "observed/instance/a0003/node"   = "node-1"
    }
    expect {
      writes  = { "observed/service/web/summary" = { running = 3, healthy = 2, updated = 1, target = 3 } }
      firings = { service_summary = 1 }
    }
  }

  then "it reports the desired image: updated" {
    facts = { "observed/instance/a0003/image" = "nginx:2" }
    expect {
      writes  = { "observed/service/web/summary" = { running = 3, healthy = 2, updated = 2, target = 3 } }
      firings = { service_summary = 1 }
    }
  }

  then "a0002 loses its state: still counted healthy, as get services counts it, and replaced" {
    delete = ["observed/instance/a0002/state"]
    expect {
      writes = {
        "observed/service/web/summary"    = { running = 2, healthy = 2, updated = 2, target = 3 }
        "observed/instance/*/service"     = "web"
        "observed/instance/*/state"       = "pending"
        "placement/instance/*"            = "node-1"
        "placement/node/node-1/*" = "web"
      }
      deletes = ["observed/instance/a0002/unhealthy_since"]
      firings = { service_summary = 1, create_instances = 1, schedule = 1, forget_unhealthy = 1 }
    }
  }
}

test "without summaries = true the same facts run the rules alone" {
  worlds = ["web_one_of_each"]
  expect {
    # No summary is written (none runs), and the rules decide as before.
    writes  = { "observed/instance/a0002/unhealthy_since" = "2026-11-29T12:00:00Z" }
    firings = { note_unhealthy = 1 }
  }
}

# While instances wait for a placement, the summary says how many: get
# services shows them as unplaced. No node fits the second and third.
test "instances that no node fits are counted unplaced" {
  summaries = true
  worlds    = [service("big", "nginx:2", 3), node("node-1"), capacity("node-1", 16, "16Gi")]
  facts     = { "desired/service/big/resources/cpu" = 10 }
  expect {
    writes = {
      "observed/service/big/summary" = { running = 0, healthy = 0, updated = 0, target = 3, unplaced = 2 }
      "observed/instance/*/service"  = "big"
      "observed/instance/*/state"    = "pending"
      "placement/instance/*"         = "node-1"
      "placement/node/node-1/*" = "big"
    }
  }

  then "the node grows: every instance placed, none unplaced" {
    facts = { "observed/node/node-1/capacity/cpu" = 32 }
    expect {
      writes  = { "observed/service/big/summary" = { running = 0, healthy = 0, updated = 0, target = 3 }, "placement/instance/*" = "node-1", "placement/node/node-1/*" = ["big", "big"] }
      firings = { service_summary = 1, schedule = 2 }
    }
  }
}
