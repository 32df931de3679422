# The seed's worked examples, as a composition of small rules: intent
# resolution, instance creation, scheduling, failure detection, endpoints.

rule "resolve_intent" {
  doc       = "The effective instance count: the policy layer's intent, else the autoscaler's, else the user's."
  principal = "intent-resolver"
  match {
    user = "intent/user/service/{name}/instances"
  }
  optional {
    auto   = "intent/autoscaler/service/{name}/instances"
    policy = "intent/policy/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "policy.orValue(auto.orValue(user))"
  }
}

rule "create_instances" {
  doc       = "While fewer instances are live (pending or running, not on an unreachable node) than effective, create pending ones."
  principal = "instances"
  match {
    want = "effective/service/{name}/instances"
  }
  aggregate "alive" {
    match {
      name  = "observed/instance/{i}/service"
      state = "observed/instance/{i}/state"
    }
    where = "state in ['pending', 'running']"
    count = true
  }
  aggregate "lost" {
    match {
      name   = "observed/instance/{i}/service"
      state  = "observed/instance/{i}/state"
      node   = "placement/instance/{i}"
      nstate = "observed/node/{node}/state"
    }
    where = "state in ['pending', 'running'] && nstate == 'unreachable'"
    count = true
  }
  let {
    live = "alive - lost"
  }
  when = "live < want"
  fresh "id" {
    count = "want - live"
  }
  emit "observed/instance/{id}/service" {
    value = "name"
  }
  emit "observed/instance/{id}/state" {
    value = "'pending'"
  }
}

rule "schedule" {
  doc       = "Place each pending instance without a placement on an alive node with room: spread the service first, then least allocated."
  principal = "scheduler"
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
  }
  optional {
    cpu = "desired/service/{svc}/resources/cpu"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match {
      nstate   = "observed/node/{node}/state"
      capacity = "observed/node/{node}/capacity/cpu"
    }
    aggregate "used" {
      match {
        node = "placement/instance/{other}"
        osvc = "observed/instance/{other}/service"
        ocpu = "desired/service/{osvc}/resources/cpu"
      }
      sum = "ocpu"
    }
    aggregate "mine" {
      match {
        node = "placement/instance/{other}"
        svc  = "observed/instance/{other}/service"
      }
      count = true
    }
    filters {
      alive = "nstate == 'alive'"
      cpu   = "capacity - used >= cpu.orValue(0.0)"
    }
    score = "-100.0 * double(mine) - used"
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}

rule "mark_unreachable" {
  doc       = "A node whose lease is gone while it is alive becomes unreachable."
  principal = "failure"
  match {
    state = "observed/node/{n}/state"
  }
  absent = ["lease/node/{n}"]
  when   = "state == 'alive'"
  emit "observed/node/{n}/state" {
    value = "'unreachable'"
  }
}

rule "publish_endpoint" {
  doc       = "An endpoint per running, healthy instance on a reachable node, for each port its service exposes."
  principal = "network"
  match {
    svc    = "observed/instance/{id}/service"
    state  = "observed/instance/{id}/state"
    ip     = "observed/instance/{id}/ip"
    health = "observed/instance/{id}/health"
    node   = "placement/instance/{id}"
    nstate = "observed/node/{node}/state"
    expose = "desired/service/{svc}/expose/{port}"
  }
  when = "state == 'running' && health == 'healthy' && nstate != 'unreachable'"
  derive "endpoint/service/{svc}/{id}" {
    value = "{'ip': ip, 'port': int(port)}"
  }
}
