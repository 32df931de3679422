test "mass loss: all three nodes lose their leases together: nothing marked, nothing replaced" {
  seed   = 1
  worlds = [node("node-1"), node("node-2"), node("node-3"), capacity("node-1", 4, "8Gi"),
    capacity("node-2", 4, "8Gi"), capacity("node-3", 4, "8Gi")]
  facts = {
    "desired/service/web"               = {}
    "intent/user/service/web/instances" = 3
    "observed/clock"                    = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      "effective/service/web/instances" = 3
      "observed/instance/*/service"     = "web"
      "observed/instance/*/state"       = "pending"
      "placement/instance/*"            = ["node-1", "node-2", "node-3"]
      "placement/node/node-1/*" = "web"
      "placement/node/node-2/*" = "web"
      "placement/node/node-3/*" = "web"
    }
  }
  then "the leases are gone: the disruption is recorded, nothing else" {
    delete = ["lease/node/node-1", "lease/node/node-2", "lease/node/node-3"]
    expect {
      writes = {
        "observed/disruption/cluster" = { leaseless = 3, nodes = 3 }
      }
      firings = { detect_disruption = 1 }
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
      deletes = ["observed/disruption/cluster"]
      firings = { detect_disruption = 1 }
    }
  }
}

test "a zone that loses most of its nodes is not failed over, another zone's lone loss is" {
  worlds = [node("b-1"), node("b-2"), node("c-1"), node("c-2"), node("c-3")]
  facts  = {
    "observed/node/a-1/state"  = "alive"
    "observed/node/a-1/leased" = true
    "observed/node/a-1/zone"   = "eu-1a"
    "observed/node/a-2/state"  = "alive"
    "observed/node/a-2/leased" = true
    "observed/node/a-2/zone"   = "eu-1a"
    "observed/node/b-1/zone"   = "eu-1b"
    "observed/node/b-2/zone"   = "eu-1b"
    "observed/node/b-3/state"  = "alive"
    "observed/node/b-3/leased" = true
    "observed/node/b-3/zone"   = "eu-1b"
    "observed/node/c-1/zone"   = "eu-1c"
    "observed/node/c-2/zone"   = "eu-1c"
    "observed/node/c-3/zone"   = "eu-1c"
    "observed/clock"           = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      "observed/node/b-3/lost_at"      = "2026-11-29T12:00:00Z"
      "observed/disruption/zone/eu-1a" = { leaseless = 2, nodes = 2 }
    }
    firings = { note_lost_lease = 1, detect_zone_disruption = 1 }
  }
  then "after the grace period, only the lone loss is failed over" {
    facts = { "observed/clock" = "2026-11-29T12:00:30Z" }
    expect {
      writes  = { "observed/node/b-3/state" = "unreachable" }
      firings = { node_unreachable = 1 }
    }
  }
}

test "after a mass loss the leases that come back last get the whole grace" {
  worlds = [node("node-1"), node("node-2"), node("node-3"), node("node-4")]
  facts  = {
    "observed/clock" = "2026-11-29T12:00:00Z"
  }
  then "one lease expires first: it is noted" {
    delete = ["lease/node/node-1"]
    expect {
      writes  = { "observed/node/node-1/lost_at" = "2026-11-29T12:00:00Z" }
      firings = { note_lost_lease = 1 }
    }
  }
  then "the others follow within the grace: a disruption, and node-1's grace is dropped" {
    facts  = { "observed/clock" = "2026-11-29T12:00:05Z" }
    delete = ["lease/node/node-2", "lease/node/node-3", "lease/node/node-4"]
    expect {
      writes  = { "observed/disruption/cluster" = { leaseless = 4, nodes = 4 } }
      deletes = ["observed/node/node-1/lost_at"]
      firings = { detect_disruption = 1, restart_grace_in_disruption = 1 }
    }
  }
  then "a minute later three leases are back: the disruption is over and node-1's grace starts now" {
    facts = {
      "observed/clock"    = "2026-11-29T12:01:00Z"
      "lease/node/node-2" = {}
      "lease/node/node-3" = {}
      "lease/node/node-4" = {}
    }
    expect {
      writes  = { "observed/node/node-1/lost_at" = "2026-11-29T12:01:00Z" }
      deletes = ["observed/disruption/cluster"]
      firings = { detect_disruption = 1, note_lost_lease = 1 }
    }
  }
  then "node-1 is back within its grace: nothing was marked" {
    facts = {
      "observed/clock"    = "2026-11-29T12:01:10Z"
      "lease/node/node-1" = {}
    }
    expect {
      deletes = ["observed/node/node-1/lost_at"]
      firings = { forget_lost_lease = 1 }
    }
  }
}

test "a node still without its lease after the grace that followed a mass loss is failed over" {
  facts = {
    "observed/node/node-1/state" = "alive"
    "observed/node/node-1/leased" = true
    "observed/node/node-2/state" = "alive"
    "observed/node/node-2/leased" = true
    "observed/node/node-3/state" = "alive"
    "observed/node/node-3/leased" = true
    "observed/clock"             = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = { "observed/disruption/cluster" = { leaseless = 3, nodes = 3 } }
    firings = { detect_disruption = 1 }
  }
  then "two leases are back: node-3's grace starts" {
    facts = {
      "observed/clock"    = "2026-11-29T12:05:00Z"
      "lease/node/node-1" = {}
      "lease/node/node-2" = {}
    }
    expect {
      writes  = { "observed/node/node-3/lost_at" = "2026-11-29T12:05:00Z" }
      deletes = ["observed/disruption/cluster"]
      firings = { detect_disruption = 1, note_lost_lease = 1 }
    }
  }
  then "the grace passes: node-3 is unreachable" {
    facts = { "observed/clock" = "2026-11-29T12:05:12Z" }
    expect {
      writes  = { "observed/node/node-3/state" = "unreachable" }
      firings = { node_unreachable = 1 }
    }
  }
}
