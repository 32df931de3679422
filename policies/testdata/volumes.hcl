# Volumes (volumes.hcl): a single-node volume pins its service's instances to
# the node it is attached to.
test "a single-node volume pins instances to its node" {
  seed   = 17
  now    = "2026-11-29T12:00:00Z"
  worlds = [node("node-1"), node("node-2"), capacity("node-1", 4, "8Gi"),
    capacity("node-2", 4, "8Gi")]
  facts = {
    "desired/volume/data"                = {}
    "desired/volume/data/access_mode"    = "single-node"
    "desired/volume/data/persistent"     = true
    "observed/volume/data/attached_node" = "node-2"
    "observed/volume/data/state"         = "detached"
    "desired/service/db"                 = {}
    "desired/service/db/image"           = "postgres:17"
    "desired/service/db/volume"          = "data"
    "intent/user/service/db/instances"   = 1
  }
  expect {
    writes = {
      "placement/service/db/node"      = "node-2"
      "placement/service/db/colocate"  = true
      "effective/service/db/instances" = 1
      "observed/instance/*/service"    = "db"
      "observed/instance/*/state"      = "pending"
      # node-1 would win the tie without the volume
      "placement/instance/*"           = "node-2"
      "placement/node/node-2/*" = "db"
    }
    firings    = { pin_to_volume = 1, colocate_single_node_volume = 1, resolve_intent = 1, create_instances = 1, schedule = 1 }
    rejections = ["schedule node=node-1: volume"]
  }
  then "a multi-node volume pins nothing" {
    facts = { "desired/volume/data/access_mode" = "multi-node" }
    expect {
      deletes = ["placement/service/db/node", "placement/service/db/colocate"]
      firings = { pin_to_volume = 1, colocate_single_node_volume = 1 }
    }
  }
}

test "before its single-node volume is attached, a service's instances join the first one" {
  seed   = 23
  now    = "2026-11-29T12:00:00Z"
  worlds = [node("node-1"), node("node-2"), node("node-3"), capacity("node-1", 4, "8Gi"),
    capacity("node-2", 4, "8Gi"), capacity("node-3", 4, "8Gi")]
  facts = {
    "desired/volume/data"              = {}
    "desired/volume/data/access_mode"  = "single-node"
    "desired/service/db"               = {}
    "desired/service/db/image"         = "postgres:17"
    "desired/service/db/volume"        = "data"
    "intent/user/service/db/instances" = 3
  }
  expect {
    writes = {
      "placement/service/db/colocate"  = true
      "effective/service/db/instances" = 3
      "observed/instance/*/service"    = "db"
      "observed/instance/*/state"      = "pending"
      # spreading alone would use all three nodes
      "placement/instance/*"           = ["node-1", "node-1", "node-1"]
      "placement/node/node-1/*" = ["db", "db", "db"]
    }
    firings    = { colocate_single_node_volume = 1, resolve_intent = 1, create_instances = 3, schedule = 3 }
    rejections = ["schedule node=node-2: volume", "schedule node=node-3: volume", "schedule node=node-2: volume", "schedule node=node-3: volume"]
  }
}
