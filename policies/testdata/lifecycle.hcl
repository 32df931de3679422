# The key schema's worked examples, through the default policies. Each node
# registered with its lease (leased) and its address, which its instances'
# endpoints take.
test "service lifecycle, node failure, heal" {
  seed   = 1
  worlds = [node("node-1"), node("node-2"), node("node-3"), capacity("node-1", 4, "8Gi"),
    capacity("node-2", 4, "8Gi"), capacity("node-3", 4, "8Gi")]
  facts = {
    "observed/node/node-1/address"      = "10.1.0.5"
    "observed/node/node-2/address"      = "10.1.0.9"
    "observed/node/node-3/address"      = "10.1.0.12"
    "desired/service/web"               = {}
    "desired/service/web/image"         = "nginx:1.28"
    "desired/service/web/instances"     = 3
    "desired/service/web/expose/8080"   = {}
    "intent/user/service/web/instances" = 3
    "observed/clock"                    = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      "effective/service/web/instances" = 3
      "observed/instance/*/service"     = "web"
      "observed/instance/*/state"       = "pending"
      "placement/instance/*"            = ["node-1", "node-2", "node-3"]
      "placement/node/node-1/7a01d" = "web"
      "placement/node/node-2/*" = "web"
      "placement/node/node-3/*" = "web"
    }
    firings = { resolve_intent = 1, create_instances = 3, schedule = 3 }
  }

  # seed 1 draws 7a01d, 8fc52, f1bd4, placed in that order on node-1, node-2, node-3
  then "the agents report their instances running and healthy: three endpoints" {
    worlds = [address("7a01d", "node-1", "10.1.0.5"), address("8fc52", "node-2", "10.1.0.9"),
      address("f1bd4", "node-3", "10.1.0.12")]
    facts = {
      "placement/instance/7a01d"           = "node-1"
      "observed/instance/7a01d/state"      = "running"
      "observed/instance/7a01d/health"     = "healthy"
      "observed/instance/7a01d/started_at" = "2026-11-29T10:00:00Z"
      "observed/instance/8fc52/state"      = "running"
      "observed/instance/8fc52/health"     = "healthy"
      "observed/instance/8fc52/started_at" = "2026-11-29T10:00:00Z"
      "observed/instance/f1bd4/state"      = "running"
      "observed/instance/f1bd4/health"     = "healthy"
      "observed/instance/f1bd4/started_at" = "2026-11-29T10:00:00Z"
    }
    expect {
      writes = {
        "endpoint/service/web/7a01d" = { ip = "10.1.0.5", port = 8080 }
        "endpoint/service/web/8fc52" = { ip = "10.1.0.9", port = 8080 }
        "endpoint/service/web/f1bd4" = { ip = "10.1.0.12", port = 8080 }
      }
      firings = { publish_endpoint = 3 }
    }
  }

  then "node-2's lease expires: the policy notes when" {
    delete = ["lease/node/node-2"]
    expect {
      writes  = { "observed/node/node-2/lost_at" = "2026-11-29T12:00:00Z" }
      firings = { note_lost_lease = 1 }
    }
  }

  then "11 seconds later: still within the grace period" {
    facts = { "observed/clock" = "2026-11-29T12:00:11Z" }
    expect {
      firings = {}
    }
  }

  then "12 seconds later: unreachable, one replacement on another node, its endpoint gone" {
    facts = { "observed/clock" = "2026-11-29T12:00:12Z" }
    expect {
      writes = {
        "observed/node/node-2/state"  = "unreachable"
        "observed/instance/*/service" = "web"
        "observed/instance/*/state"   = "pending"
        "placement/instance/*"        = "node-1"
        "placement/node/node-1/0f2f5" = "web"
      }
      deletes = ["endpoint/service/web/8fc52"]
      firings = { node_unreachable = 1, create_instances = 1, schedule = 1, publish_endpoint = 1 }
    }
  }

  then "the replacement runs: its endpoint appears" {
    worlds = [address("0f2f5", "node-1", "10.1.0.5")]
    facts  = {
      "observed/instance/0f2f5/state"      = "running"
      "observed/instance/0f2f5/health"     = "healthy"
      "observed/instance/0f2f5/started_at" = "2026-11-29T11:00:00Z"
    }
    expect {
      # With host networking the replacement is reached at node-1's address.
      writes  = { "endpoint/service/web/0f2f5" = { ip = "10.1.0.5", port = 8080 } }
      firings = { publish_endpoint = 1 }
    }
  }

  then "node-2 heals with its old instance still running: the newest extra is stopped, the longest-running kept" {
    facts = {
      "lease/node/node-2" = {}
    }
    expect {
      writes  = {
        "observed/node/node-2/state" = "alive"
        "endpoint/service/web/8fc52" = { ip = "10.1.0.9", port = 8080 }
      }
      deletes = ["placement/instance/0f2f5", "endpoint/service/web/0f2f5", "observed/node/node-2/lost_at", "placement/node/node-1/0f2f5"]
      firings = { node_returns = 1, forget_lost_lease = 1, stop_placed_extras = 1, publish_endpoint = 2 }
    }
  }
}
