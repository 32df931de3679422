# Untrusted and broken input (failure.hcl, scheduler.hcl, endpoints.hcl,
# instances.hcl): what a rogue agent or a careless writer puts past apply
# cannot steer placement, endpoints or failure detection, and one bad fact
# holds back only the bindings that read it.

test "a lease key put without an etcd lease keeps no node alive: it is failed over after the grace" {
  worlds = [node("node-2"), node("node-3")]
  facts  = {
    "observed/node/node-1/state"  = "alive"
    "observed/node/node-1/leased" = true
    "observed/clock"              = "2026-11-29T12:00:00Z"
  }
  expect {
    writes  = { "observed/node/node-1/lost_at" = "2026-11-29T12:00:00Z" }
    firings = { note_lost_lease = 1 }
  }
  then "its agent is gone; someone puts lease/node/node-1 {} with no lease" {
    facts    = { "lease/node/node-1" = {} }
    unleased = ["lease/node/node-1"]
    expect {
      firings = {}
    }
  }
  then "the grace passes: unreachable all the same" {
    facts = { "observed/clock" = "2026-11-29T12:00:12Z" }
    expect {
      writes  = { "observed/node/node-1/state" = "unreachable" }
      firings = { node_unreachable = 1 }
    }
  }
}

test "a node that never held a lease gets no placement, however big: the lease filter names it" {
  worlds = [capacity("big", 1000000, "1000Gi"), capacity("small", 8, "8Gi")]
  facts  = {
    "observed/node/big/state"           = "alive"
    "lease/node/big"                    = {}
    "observed/node/small/state"         = "alive"
    "lease/node/small"                  = {}
    "desired/service/big"               = {}
    "desired/service/big/resources/cpu" = 1
    "intent/user/service/big/instances" = 4
  }
  unleased = ["lease/node/big"]
  expect {
    writes = {
      "observed/node/small/leased"      = true
      "effective/service/big/instances" = 4
      "observed/instance/*/service"     = "big"
      "observed/instance/*/state"       = "pending"
      "placement/instance/*"            = ["small", "small", "small", "small"]
      "placement/node/small/*" = ["big", "big", "big", "big"]
    }
    firings    = { note_leased = 1, resolve_intent = 1, create_instances = 4, schedule = 4 }
    rejections = ["schedule node=big: lease"]
  }
}

test "nodes that never held a lease do not count in the mass-loss shares" {
  worlds = [node("node-2"), node("node-3")]
  facts  = {
    "observed/node/node-1/state"  = "alive"
    "observed/node/node-1/leased" = true
    "observed/node/fake-01/state" = "alive"
    "observed/node/fake-02/state" = "alive"
    "observed/node/fake-03/state" = "alive"
    "observed/node/fake-04/state" = "alive"
    "observed/node/fake-05/state" = "alive"
    "observed/node/fake-06/state" = "alive"
    "observed/node/fake-07/state" = "alive"
    "observed/node/fake-08/state" = "alive"
    "observed/node/fake-09/state" = "alive"
    "observed/node/fake-10/state" = "alive"
    "observed/node/fake-11/state" = "alive"
    "observed/node/fake-12/state" = "alive"
    "observed/clock"              = "2026-11-29T12:00:00Z"
  }
  # node-1's lease is gone: 1 of the 3 leased nodes, not 13 of 15; the fake
  # nodes are never marked lost or unreachable either.
  expect {
    writes  = { "observed/node/node-1/lost_at" = "2026-11-29T12:00:00Z" }
    firings = { note_lost_lease = 1 }
  }
  then "the grace passes: node-1 is failed over" {
    facts = { "observed/clock" = "2026-11-29T12:00:12Z" }
    expect {
      writes  = { "observed/node/node-1/state" = "unreachable" }
      firings = { node_unreachable = 1 }
    }
  }
}

test "a report naming another node than the placement is not believed: no endpoint, and it is recorded" {
  worlds = [node("node-2"), node("node-3"), serving("71446", "web", "node-2"),
    address("71446", "node-2", "10.1.0.9")]
  facts = {
    "observed/node/node-2/address"      = "10.1.0.9"
    "observed/node/node-3/address"      = "10.1.0.12"
    "desired/service/web"               = {}
    "desired/service/web/expose/8080"   = {}
    "intent/user/service/web/instances" = 1
    "effective/service/web/instances"   = 1
  }
  expect {
    writes  = { "endpoint/service/web/71446" = { ip = "10.1.0.9", port = 8080 } }
    firings = { publish_endpoint = 1 }
  }
  then "a rogue report: the instance runs on node-3 at 1.2.3.4" {
    worlds = [address("71446", "node-3", "1.2.3.4")]
    expect {
      # Not counted as live any more: a replacement is created (more
      # instances, never fewer; no node here has capacity facts to place it).
      writes = {
        "observed/instance/71446/disowned" = "node-3"
        "observed/instance/*/service"      = "web"
        "observed/instance/*/state"        = "pending"
      }
      deletes = ["endpoint/service/web/71446"]
      firings = { disown_report = 1, publish_endpoint = 1, create_instances = 1 }
    }
  }
  then "its own agent reports again: believed, the endpoint is back at node-2's address" {
    worlds = [address("71446", "node-2", "6.6.6.6")]
    expect {
      # Counted again: the waiting replacement is cancelled.
      writes = {
        "endpoint/service/web/71446" = { ip = "10.1.0.9", port = 8080 }
        "observed/instance/*/state"  = "stopped"
      }
      deletes = ["observed/instance/71446/disowned"]
      firings = { disown_report = 1, publish_endpoint = 1, cancel_waiting_extras = 1 }
    }
  }
}

test "fake instances placed on a node that never held a lease stop no real one and get no endpoint" {
  worlds = [node("node-1"), serving("a0001", "web", "node-1"), serving("a0002", "web", "node-1"),
    serving("f0001", "web", "fake"), serving("f0002", "web", "fake")]
  facts = {
    "observed/node/node-1/address"       = "10.1.0.5"
    "observed/node/fake/state"           = "alive"
    "observed/node/fake/address"         = "6.6.6.6"
    "desired/service/web"                = {}
    "desired/service/web/expose/8080"    = {}
    "intent/user/service/web/instances"  = 2
    "effective/service/web/instances"    = 2
    "observed/instance/a0001/node"       = "node-1"
    "observed/instance/a0001/started_at" = "2026-11-29T10:00:00Z"
    "observed/instance/a0002/node"       = "node-1"
    "observed/instance/a0002/started_at" = "2026-11-29T10:00:00Z"
    "observed/instance/f0001/node"       = "fake"
    "observed/instance/f0001/started_at" = "2020-01-01T00:00:00Z"
    "observed/instance/f0002/node"       = "fake"
    "observed/instance/f0002/started_at" = "2020-01-01T00:00:00Z"
  }
  expect {
    writes = {
      "endpoint/service/web/a0001" = { ip = "10.1.0.5", port = 8080 }
      "endpoint/service/web/a0002" = { ip = "10.1.0.5", port = 8080 }
    }
    firings = { publish_endpoint = 2 }
  }
}

test "a bad fact past apply is absent for the bindings that read it; other services converge" {
  worlds = [node("node-1"), capacity("node-1", 4, "8Gi")]
  facts  = {
    "observed/node/node-1/address"      = "10.1.0.5"
    "desired/service/web"               = {}
    "desired/service/web/expose/8080"   = {}
    "intent/user/service/web/instances" = 1
    "desired/service/api"               = {}
    "intent/user/service/api/instances" = 1
  }
  raw = {
    "desired/service/web/image"          = "12345"
    "desired/service/web/resources/cpu"  = "-3"
    "desired/service/web/placement/zone" = "\"BAD ZONE\""
    "desired/service/web/expose/notaport" = "{}"
    "observed/node/node-1/zone"          = "\"BAD ZONE\""
    "desired/service/api/resources/cpu"  = "\"lots\""
  }
  # web's image, cpu and zone are as if not given; the key of no valid form
  # is no port; node-1 has no zone. Both services are placed.
  expect {
    writes = {
      "effective/service/web/instances" = 1
      "effective/service/api/instances" = 1
      "observed/instance/*/service"     = ["web", "api"]
      "observed/instance/*/state"       = ["pending", "pending"]
      "placement/instance/*"            = ["node-1", "node-1"]
      "placement/node/node-1/*" = ["api", "web"]
    }
    firings = { resolve_intent = 2, create_instances = 2, schedule = 2 }
  }
}

test "an endpoint someone else wrote under the network view, bad value or not, is deleted" {
  facts = {
    "desired/service/web"             = {}
    "desired/service/web/expose/8080" = {}
  }
  raw = {
    "endpoint/service/web/b0001" = "\"garbage\""
    "endpoint/service/web/b0002" = "{\"ip\": \"6.6.6.6\", \"port\": 8080}"
  }
  expect {
    deletes = ["endpoint/service/web/b0001", "endpoint/service/web/b0002"]
    firings = { publish_endpoint = 2 }
  }
}

test "fake instances of the new image on a fake node make no real instance of a rollout look replaced" {
  seed   = 3
  worlds = [service("web", "nginx:2", 2), node("node-1"), capacity("node-1", 8, "8Gi"),
    serving_image("a0001", "web", "node-1", "nginx:1"),
    serving_image("a0002", "web", "node-1", "nginx:1"),
    serving_image("f0001", "web", "fake", "nginx:2"),
    serving_image("f0002", "web", "fake", "nginx:2")]
  facts = {
    "observed/node/node-1/address" = "10.1.0.5"
    "observed/node/fake/state"     = "alive"
    "observed/instance/a0001/node" = "node-1"
    "observed/instance/a0002/node" = "node-1"
    "observed/instance/f0001/node" = "fake"
    "observed/instance/f0002/node" = "fake"
  }
  # The rollout goes on as without the fakes: one new instance first
  # (max_extra 1), and no old one is stopped before a real new one serves.
  expect {
    writes = {
      "observed/instance/*/service"  = "web"
      "observed/instance/*/state"    = "pending"
      "placement/instance/*"         = "node-1"
      "observed/service/web/rollout" = { image = "nginx:2", reason = "", state = "progressing", total = 2, updated = 0 }
      "placement/node/node-1/*" = "web"
    }
    firings = { replace_first = 1, schedule = 1, rollout_status = 1 }
  }
}
