# The placements by node (scheduler.hcl, index_placement and
# unindex_placement): placement/node/{node}/{id} names the service of every
# placed instance, and nothing else is under it.
test "placements made before the index get their entries; a stray entry goes; a report does not rewrite one" {
  worlds = [node("node-1"), node("node-2"), service("web", "nginx:1.28", 2), service("api", "api:2", 1),
    instance("a0001", "web", "running"), instance("a0002", "web", "running"), instance("b0001", "api", "running")]
  facts = {
    # Placed without an entry, as before the index.
    "placement/instance/a0001" = "node-1"
    "placement/instance/a0002" = "node-2"
    # An entry that names another service than the instance's report: the
    # report (any node may write it) does not rewrite it.
    "placement/instance/b0001"     = "node-1"
    "placement/node/node-1/b0001" = "web"
    # Entries of no placement, and of a placement on another node.
    "placement/node/node-2/f0009" = "web"
    "placement/node/node-2/b0001" = "api"
  }
  expect {
    writes = {
      "placement/node/node-1/a0001" = "web"
      "placement/node/node-2/a0002" = "web"
    }
    deletes = ["placement/node/node-2/f0009", "placement/node/node-2/b0001"]
    firings = { index_placement = 2, unindex_placement = 2 }
  }

  then "an entry deleted by hand comes back; one put by hand for an unplaced instance goes" {
    delete = ["placement/node/node-2/a0002"]
    facts  = { "placement/node/node-1/b0002" = "api" }
    expect {
      writes  = { "placement/node/node-2/a0002" = "web" }
      deletes = ["placement/node/node-1/b0002"]
      firings = { index_placement = 1, unindex_placement = 1 }
    }
  }

  then "a placement moved by hand moves its entry" {
    facts = { "placement/instance/a0001" = "node-2" }
    expect {
      writes  = { "placement/node/node-2/a0001" = "web" }
      deletes = ["placement/node/node-1/a0001"]
      firings = { index_placement = 1, unindex_placement = 1 }
    }
  }
}

test "the scheduler writes each entry with its placement" {
  seed   = 3
  worlds = [node("node-1"), capacity("node-1", 4, "8Gi"), service("web", "nginx:1.28", 2)]
  expect {
    writes = {
      "observed/instance/*/service" = "web"
      "observed/instance/*/state"   = "pending"
      "placement/instance/*"        = ["node-1", "node-1"]
      "placement/node/node-1/*"     = ["web", "web"]
    }
    firings = { create_instances = 2, schedule = 2 }
  }
}
