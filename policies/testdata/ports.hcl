# The scheduler's port filter: on a node whose instances share its network,
# a port is taken by the first instance exposing it.
test "two services on 8080, one host-network node: one placed, the other pending for port; a second node takes it" {
  facts = {
    "observed/node/node-1/state"           = "alive"
    "observed/node/node-1/capacity/cpu"    = 4
    "observed/node/node-1/capacity/memory" = "8Gi"
    "observed/node/node-1/network"         = "host"
    "lease/node/node-1"                    = {}
    "observed/node/node-1/leased"          = true
    "desired/service/one"                  = {}
    "desired/service/one/expose/8080"      = {}
    "desired/service/two"                  = {}
    "desired/service/two/expose/9090"      = {}
    "desired/service/two/expose/8080"      = {}
    "observed/instance/a0001/service"      = "one"
    "observed/instance/a0001/state"        = "pending"
    "observed/instance/b0001/service"      = "two"
    "observed/instance/b0001/state"        = "pending"
  }
  expect {
    writes     = { "placement/instance/a0001" = "node-1" }
    rejections = ["schedule node=node-1: port"]
    firings    = { schedule = 1 }
  }

  then "a second node joins: the waiting one is placed there" {
    facts = {
      "observed/node/node-2/state"           = "alive"
      "observed/node/node-2/capacity/cpu"    = 4
      "observed/node/node-2/capacity/memory" = "8Gi"
      "observed/node/node-2/network"         = "host"
      "lease/node/node-2"                    = {}
      "observed/node/node-2/leased"          = true
    }
    expect {
      writes  = { "placement/instance/b0001" = "node-2" }
      firings = { schedule = 1 }
    }
  }

  then "another instance of one: 8080 is taken on both nodes" {
    facts = {
      "observed/instance/a0002/service" = "one"
      "observed/instance/a0002/state"   = "pending"
    }
    expect {
      rejections = ["schedule node=node-1: port", "schedule node=node-2: port"]
      firings    = {}
    }
  }
}

test "nodes that give each instance its own address (sim, the key schema's example) share ports" {
  facts = {
    "observed/node/node-1/state"           = "alive"
    "observed/node/node-1/capacity/cpu"    = 4
    "observed/node/node-1/capacity/memory" = "8Gi"
    "lease/node/node-1"                    = {}
    "observed/node/node-1/leased"          = true
    "desired/service/one"                  = {}
    "desired/service/one/expose/8080"      = {}
    "observed/instance/a0001/service"      = "one"
    "observed/instance/a0001/state"        = "pending"
    "observed/instance/a0002/service"      = "one"
    "observed/instance/a0002/state"        = "pending"
  }
  expect {
    writes  = { "placement/instance/a0001" = "node-1", "placement/instance/a0002" = "node-1" }
    firings = { schedule = 2 }
  }
}
