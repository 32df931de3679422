# Worlds shared by the rule tests of this directory: the nodes, services
# and instances most tests start from, included by name (see docs/rules.md,
# "Testing rules"). A test's own facts win over a world's.

world "node" {
  params = ["id"]
  facts = {
    "observed/node/${id}/state"  = "alive"
    "observed/node/${id}/leased" = true
    "lease/node/${id}"           = {}
  }
}

world "capacity" {
  params = ["node", "cpu", "memory"]
  facts  = { "observed/node/${node}/capacity/cpu" = cpu, "observed/node/${node}/capacity/memory" = memory }
}

# A service as apply and the user's intent leave it.
world "service" {
  params = ["name", "image", "instances"]
  facts = {
    "desired/service/${name}"               = {}
    "desired/service/${name}/image"         = image
    "intent/user/service/${name}/instances" = instances
    "effective/service/${name}/instances"   = instances
  }
}

# An instance as its agent reports it, not placed (or its placement gone).
world "instance" {
  params = ["id", "service", "state"]
  facts  = { "observed/instance/${id}/service" = service, "observed/instance/${id}/state" = state }
}

world "placed" {
  params = ["id", "service", "state", "node"]
  worlds = [instance(id, service, state)]
  facts  = { "placement/instance/${id}" = node, "placement/node/${node}/${id}" = service }
}

# Placed, running and healthy.
world "serving" {
  params = ["id", "service", "node"]
  worlds = [placed(id, service, "running", node)]
  facts  = { "observed/instance/${id}/health" = "healthy" }
}

# Serving, with the image its agent reports.
world "serving_image" {
  params = ["id", "service", "node", "image"]
  worlds = [serving(id, service, node)]
  facts  = { "observed/instance/${id}/image" = image }
}

# The node an instance's agent says it runs on, and its address there.
world "address" {
  params = ["id", "node", "ip"]
  facts  = { "observed/instance/${id}/node" = node, "observed/instance/${id}/ip" = ip }
}

# What an agent reports of an instance it runs.
world "report" {
  params = ["id", "state", "health", "image"]
  facts = {
    "observed/instance/${id}/state"  = state
    "observed/instance/${id}/health" = health
    "observed/instance/${id}/image"  = image
  }
}

# api at api:1, its two instances serving on node-1.
world "api_two_serving" {
  worlds = [service("api", "api:1", 2), node("node-1"), capacity("node-1", 16, "16Gi"),
    serving_image("c0001", "api", "node-1", "api:1"), serving_image("c0002", "api", "node-1", "api:1")]
}
