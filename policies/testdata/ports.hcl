# The scheduler's port filter: on a node whose instances share its network,
# a port is taken by the first instance exposing it.
test "two services on 8080, one host-network node: one placed, the other pending for port; a second node takes it" {
  worlds = [node("node-1"), capacity("node-1", 4, "8Gi"), instance("a0001", "one", "pending"),
    instance("b0001", "two", "pending")]
  facts = {
    "observed/node/node-1/network"    = "host"
    "desired/service/one"             = {}
    "desired/service/one/expose/8080" = {}
    "desired/service/two"             = {}
    "desired/service/two/expose/9090" = {}
    "desired/service/two/expose/8080" = {}
  }
  expect {
    writes     = { "placement/instance/a0001" = "node-1", "placement/node/node-1/a0001" = "one" }
    rejections = ["schedule node=node-1: port"]
    firings    = { schedule = 1 }
  }

  then "a second node joins: the waiting one is placed there" {
    worlds = [node("node-2"), capacity("node-2", 4, "8Gi")]
    facts  = {
      "observed/node/node-2/network" = "host"
    }
    expect {
      writes  = { "placement/instance/b0001" = "node-2", "placement/node/node-2/b0001" = "two" }
      firings = { schedule = 1 }
    }
  }

  then "another instance of one: 8080 is taken on both nodes" {
    worlds = [instance("a0002", "one", "pending")]
    expect {
      rejections = ["schedule node=node-1: port", "schedule node=node-2: port"]
      firings    = {}
    }
  }
}

test "nodes that give each instance its own address (sim, the key schema's example) share ports" {
  worlds = [node("node-1"), capacity("node-1", 4, "8Gi"), instance("a0001", "one", "pending"),
    instance("a0002", "one", "pending")]
  facts = {
    "desired/service/one"             = {}
    "desired/service/one/expose/8080" = {}
  }
  expect {
    writes  = { "placement/instance/a0001" = "node-1", "placement/instance/a0002" = "node-1", "placement/node/node-1/a0001" = "one", "placement/node/node-1/a0002" = "one" }
    firings = { schedule = 2 }
  }
}
