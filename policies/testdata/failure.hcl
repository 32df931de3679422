test "mass loss: all three nodes lose their leases together: nothing marked, nothing replaced" {
  seed = 1
  facts = {
    "observed/node/node-1/state"           = "alive"
    "observed/node/node-1/capacity/cpu"    = 4
    "observed/node/node-1/capacity/memory" = "8Gi"
    "lease/node/node-1"                    = {}
    "observed/node/node-2/state"           = "alive"
    "observed/node/node-2/capacity/cpu"    = 4
    "observed/node/node-2/capacity/memory" = "8Gi"
    "lease/node/node-2"                    = {}
    "observed/node/node-3/state"           = "alive"
    "observed/node/node-3/capacity/cpu"    = 4
    "observed/node/node-3/capacity/memory" = "8Gi"
    "lease/node/node-3"                    = {}
    "desired/service/web"                  = {}
    "intent/user/service/web/instances"    = 3
    "observed/clock"                       = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      "effective/service/web/instances" = 3
      "observed/instance/*/service"     = "web"
      "observed/instance/*/state"       = "pending"
      "placement/instance/*"            = ["node-1", "node-2", "node-3"]
    }
  }
  then "the leases are gone: the disruption is recorded, nothing else" {
    delete = ["lease/node/node-1", "lease/node/node-2", "lease/node/node-3"]
    expect {
      writes = {
        "observed/disruption/cluster" = { leaseless = 3, nodes = 3 }
        "observed/node/*/lost_at"     = "2026-11-29T12:00:00Z"
      }
      firings = { detect_disruption = 1, note_lost_lease = 3 }
    }
  }
  then "a minute later: still nothing marked, nothing replaced" {
    facts = { "observed/clock" = "2026-11-29T12:01:00Z" }
    expect {
      firings = {}
    }
  }
  then "the leases return: nothing has moved, the disruption is over" {
    facts = {
      "lease/node/node-1" = {}
      "lease/node/node-2" = {}
      "lease/node/node-3" = {}
    }
    expect {
      deletes = ["observed/disruption/cluster", "observed/node/node-1/lost_at", "observed/node/node-2/lost_at", "observed/node/node-3/lost_at"]
      firings = { detect_disruption = 1, forget_lost_lease = 3 }
    }
  }
}

test "a zone that loses most of its nodes is not failed over, another zone's lone loss is" {
  facts = {
    "observed/node/a-1/state" = "alive"
    "observed/node/a-1/zone"  = "eu-1a"
    "observed/node/a-2/state" = "alive"
    "observed/node/a-2/zone"  = "eu-1a"
    "observed/node/b-1/state" = "alive"
    "observed/node/b-1/zone"  = "eu-1b"
    "lease/node/b-1"          = {}
    "observed/node/b-2/state" = "alive"
    "observed/node/b-2/zone"  = "eu-1b"
    "lease/node/b-2"          = {}
    "observed/node/b-3/state" = "alive"
    "observed/node/b-3/zone"  = "eu-1b"
    "observed/node/c-1/state" = "alive"
    "observed/node/c-1/zone"  = "eu-1c"
    "lease/node/c-1"          = {}
    "observed/node/c-2/state" = "alive"
    "observed/node/c-2/zone"  = "eu-1c"
    "lease/node/c-2"          = {}
    "observed/node/c-3/state" = "alive"
    "observed/node/c-3/zone"  = "eu-1c"
    "lease/node/c-3"          = {}
    "observed/clock"          = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      "observed/node/*/lost_at"        = "2026-11-29T12:00:00Z"
      "observed/disruption/zone/eu-1a" = { leaseless = 2, nodes = 2 }
    }
    firings = { note_lost_lease = 3, detect_zone_disruption = 1 }
  }
  then "after the grace period, only the lone loss is failed over" {
    facts = { "observed/clock" = "2026-11-29T12:00:30Z" }
    expect {
      writes  = { "observed/node/b-3/state" = "unreachable" }
      firings = { node_unreachable = 1 }
    }
  }
}
