test "capacity: 4 nodes of 2 cpu, 10 instances of 1 cpu: 8 placed, 2 pending, every node rejected for cpu" {
  seed   = 7
  worlds = [node("node-1"), node("node-2"), node("node-3"), node("node-4"),
    capacity("node-1", 2, "4Gi"), capacity("node-2", 2, "4Gi"), capacity("node-3", 2, "4Gi"),
    capacity("node-4", 2, "4Gi")]
  facts = {
    "desired/service/batch"                  = {}
    "desired/service/batch/image"            = "busybox:1"
    "desired/service/batch/resources/cpu"    = 1
    "desired/service/batch/resources/memory" = "128Mi"
    "intent/user/service/batch/instances"    = 10
  }
  expect {
    writes = {
      "effective/service/batch/instances" = 10
      "observed/instance/*/service"       = "batch"
      "observed/instance/*/state"         = "pending"
      "placement/instance/*" = ["node-1", "node-1", "node-2", "node-2", "node-3", "node-3", "node-4", "node-4"]
      "placement/node/node-1/*" = ["batch", "batch"]
      "placement/node/node-2/*" = ["batch", "batch"]
      "placement/node/node-3/*" = ["batch", "batch"]
      "placement/node/node-4/*" = ["batch", "batch"]
    }
    firings = { resolve_intent = 1, create_instances = 10, schedule = 8 }
    rejections = [
      "schedule node=node-1: cpu",
      "schedule node=node-2: cpu",
      "schedule node=node-3: cpu",
      "schedule node=node-4: cpu",
      "schedule node=node-1: cpu",
      "schedule node=node-2: cpu",
      "schedule node=node-3: cpu",
      "schedule node=node-4: cpu",
    ]
  }
}

test "placement constraints: architecture and zone filter nodes; memory counts too" {
  worlds = [node("arm-1"), node("amd-1"), node("amd-2"), capacity("arm-1", 8, "8Gi"),
    capacity("amd-1", 8, "8Gi"), capacity("amd-2", 8, "1Gi"), capacity("amd-3", 8, "8Gi"),
    instance("a0001", "api", "pending")]
  facts = {
    "observed/node/arm-1/architecture"           = "arm64"
    "observed/node/arm-1/zone"                   = "eu-1a"
    "observed/node/amd-1/architecture"           = "amd64"
    "observed/node/amd-1/zone"                   = "eu-1b"
    "observed/node/amd-2/architecture"           = "amd64"
    "observed/node/amd-2/zone"                   = "eu-1a"
    "observed/node/amd-3/state"                  = "draining"
    "observed/node/amd-3/leased"                 = true
    "lease/node/amd-3"                           = {}
    "observed/node/amd-3/architecture"           = "amd64"
    "observed/node/amd-3/zone"                   = "eu-1a"
    "desired/service/api"                        = {}
    "desired/service/api/resources/memory"       = "2Gi"
    "desired/service/api/placement/architecture" = "amd64"
    "desired/service/api/placement/zone"         = "eu-1a"
  }
  expect {
    rejections = [
      "schedule node=amd-1: zone",
      "schedule node=amd-2: memory",
      "schedule node=amd-3: alive",
      "schedule node=arm-1: architecture",
    ]
  }
}

test "spread: a service's instances go to different zones and nodes before doubling up" {
  worlds = [node("a-1"), node("b-1"), capacity("a-1", 4, "4Gi"), capacity("b-1", 4, "4Gi"),
    instance("a0001", "web", "pending"), instance("a0002", "web", "pending"),
    instance("a0003", "web", "pending")]
  facts = {
    "desired/service/web" = {}
  }
  expect {
    writes = {
      "placement/instance/a0001" = "a-1"
      "placement/instance/a0002" = "b-1"
      "placement/instance/a0003" = "a-1"
      "placement/node/a-1/a0001" = "web"
      "placement/node/a-1/a0003" = "web"
      "placement/node/b-1/a0002" = "web"
    }
  }
}

# Nodes that register after the service was applied, in the same batch
# as their leases: the engine places the waiting instances on them, and the
# placed ones count at once (only on nodes it noted as leased), so the count
# is created once.
test "nodes registering while a service waits: its instances are created once" {
  seed = 7
  facts = {
    "desired/service/web"               = {}
    "desired/service/web/image"         = "nginx:1.28"
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
  then "three nodes register" {
    worlds = [capacity("node-1", 4, "8Gi"), capacity("node-2", 4, "8Gi"), capacity("node-3", 4, "8Gi")]
    facts = {
      "observed/node/node-1/state" = "alive"
      "lease/node/node-1"          = {}
      "observed/node/node-2/state" = "alive"
      "lease/node/node-2"          = {}
      "observed/node/node-3/state" = "alive"
      "lease/node/node-3"          = {}
    }
    expect {
      writes = {
        "observed/node/node-1/leased" = true
        "observed/node/node-2/leased" = true
        "observed/node/node-3/leased" = true
        "placement/instance/*"        = ["node-1", "node-2", "node-3"]
        "placement/node/node-1/*" = "web"
        "placement/node/node-2/*" = "web"
        "placement/node/node-3/*" = "web"
      }
      firings = { note_leased = 3, schedule = 3 }
    }
  }
}

# Services that request no cpu or memory allocate nothing: every node is
# as allocated as the next, and each went to the first node by name. The
# instances a node runs break the tie: six such services on three nodes,
# two a node.
test "services that request nothing spread by the instances a node runs" {
  worlds = [node("node-1"), node("node-2"), node("node-3"),
    capacity("node-1", 4, "8Gi"), capacity("node-2", 4, "8Gi"), capacity("node-3", 4, "8Gi"),
    service("s1", "nginx:1", 1), service("s2", "nginx:1", 1), service("s3", "nginx:1", 1),
    service("s4", "nginx:1", 1), service("s5", "nginx:1", 1), service("s6", "nginx:1", 1)]
  expect {
    writes = {
      "observed/instance/*/service" = ["s1", "s2", "s3", "s4", "s5", "s6"]
      "observed/instance/*/state"   = "pending"
      "placement/instance/*"        = ["node-1", "node-1", "node-2", "node-2", "node-3", "node-3"]
      "placement/node/node-1/*" = ["s5", "s3"]
      "placement/node/node-2/*" = ["s4", "s6"]
      "placement/node/node-3/*" = ["s1", "s2"]
    }
    firings = { create_instances = 6, schedule = 6 }
  }
}
