test "three instances spread over three nodes" {
  facts = {
    "desired/service/web/resources/cpu" = 1
    "observed/node/node-1/state"        = "alive"
    "observed/node/node-1/capacity/cpu" = 2
    "observed/node/node-2/state"        = "alive"
    "observed/node/node-2/capacity/cpu" = 2
    "observed/node/node-3/state"        = "alive"
    "observed/node/node-3/capacity/cpu" = 2
    "observed/instance/a8f31/service"   = "web"
    "observed/instance/a8f31/state"     = "pending"
    "observed/instance/b72c9/service"   = "web"
    "observed/instance/b72c9/state"     = "pending"
    "observed/instance/c913d/service"   = "web"
    "observed/instance/c913d/state"     = "pending"
  }
  expect {
    writes = {
      "placement/instance/a8f31" = "node-1"
      "placement/instance/b72c9" = "node-2"
      "placement/instance/c913d" = "node-3"
    }
    firings = { schedule = 3 }
  }
  then "a second service fills the least allocated nodes in name order" {
    facts = {
      "desired/service/db/resources/cpu" = 1
      "observed/instance/d0001/service"  = "db"
      "observed/instance/d0001/state"    = "pending"
      "observed/instance/d0002/service"  = "db"
      "observed/instance/d0002/state"    = "pending"
    }
    expect {
      writes = {
        "placement/instance/d0001" = "node-1"
        "placement/instance/d0002" = "node-2"
      }
    }
  }
}

test "capacity consumed earlier in the same round is respected" {
  facts = {
    "desired/service/web/resources/cpu" = 1
    "observed/node/node-1/state"        = "alive"
    "observed/node/node-1/capacity/cpu" = 2
    "observed/node/node-2/state"        = "alive"
    "observed/node/node-2/capacity/cpu" = 2
    "observed/node/node-3/state"        = "alive"
    "observed/node/node-3/capacity/cpu" = 2
    "observed/node/node-4/state"        = "alive"
    "observed/node/node-4/capacity/cpu" = 2
    "observed/node/node-5/state"        = "unreachable"
    "observed/node/node-5/capacity/cpu" = 0.5
    "observed/instance/a0001/service"   = "web"
    "observed/instance/a0001/state"     = "pending"
    "observed/instance/a0002/service"   = "web"
    "observed/instance/a0002/state"     = "pending"
    "observed/instance/a0003/service"   = "web"
    "observed/instance/a0003/state"     = "pending"
    "observed/instance/a0004/service"   = "web"
    "observed/instance/a0004/state"     = "pending"
    "observed/instance/a0005/service"   = "web"
    "observed/instance/a0005/state"     = "pending"
    "observed/instance/a0006/service"   = "web"
    "observed/instance/a0006/state"     = "pending"
    "observed/instance/a0007/service"   = "web"
    "observed/instance/a0007/state"     = "pending"
    "observed/instance/a0008/service"   = "web"
    "observed/instance/a0008/state"     = "pending"
    "observed/instance/a0009/service"   = "web"
    "observed/instance/a0009/state"     = "pending"
    "observed/instance/a000a/service"   = "web"
    "observed/instance/a000a/state"     = "pending"
  }
  expect {
    writes = {
      "placement/instance/a0001" = "node-1"
      "placement/instance/a0002" = "node-2"
      "placement/instance/a0003" = "node-3"
      "placement/instance/a0004" = "node-4"
      "placement/instance/a0005" = "node-1"
      "placement/instance/a0006" = "node-2"
      "placement/instance/a0007" = "node-3"
      "placement/instance/a0008" = "node-4"
    }
    firings = { schedule = 8 }
    # every filter a node failed, not only the first
    rejections = [
      "schedule node=node-1: cpu",
      "schedule node=node-2: cpu",
      "schedule node=node-3: cpu",
      "schedule node=node-4: cpu",
      "schedule node=node-5: alive, cpu",
    ]
  }
}
