# Instances. Counts and choices rest on what the engine writes (placement/,
# leased nodes) and on reports from the placed node only: a node that never
# held a lease, or a report naming another node, counts for nothing.
relation "instance" {
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
  }
}

relation "unplaced" {
  doc    = "An instance without a placement: pending, or stopping once its placement is gone."
  over   = "instance"
  absent = ["placement/instance/{id}"]
}

relation "placement" {
  over = "instance"
  match { node = "placement/instance/{id}" }
}

relation "leased" {
  doc  = "A placed instance on a node that has held a lease, with the node its agent reports."
  over = "placement"
  match { held = "observed/node/{node}/leased" }
  optional { inode = "observed/instance/{id}/node" }
}

relation "live" {
  doc  = "A placed instance on a node that has held a lease, with the node's state."
  over = "leased"
  match { nstate = "observed/node/{node}/state" }
}

relation "spec" {
  doc = "What the agent reports of an instance's health and spec, and its service's current spec."
  optional {
    health   = "observed/instance/{id}/health"
    iimage   = "observed/instance/{id}/image"
    retiring = "observed/instance/{id}/retiring"
    icpu     = "observed/instance/{id}/resources/cpu"
    imem     = "observed/instance/{id}/resources/memory"
    ispec    = "observed/instance/{id}/spec_digest"
    dimage   = "desired/service/{svc}/image"
    dcpu     = "desired/service/{svc}/resources/cpu"
    dmem     = "desired/service/{svc}/resources/memory"
    dspec    = "desired/service/{svc}/spec_digest"
  }
}

let {
  believed    = "inode.orValue(node) == node"
  active      = "state == 'pending' || state == 'running'"
  reached     = "nstate != 'unreachable' && believed"
  counted     = "active && reached"
  serving     = "state == 'running' && health.orValue('unknown') == 'healthy'"
  other_image = "dimage.hasValue() && iimage.hasValue() && iimage.value() != dimage.value()"
  drifted     = "(icpu.hasValue() && icpu.value() != dcpu.orValue(0.0)) || (imem.hasValue() && imem.value() != dmem.orValue(0)) || (ispec.hasValue() && ispec.value() != dspec.orValue(''))"
  replaced    = "retiring.hasValue() || other_image || drifted"
  allowed     = "want + (old > 0 ? extra.orValue(1) : 0)"
}

action "create_pending" {
  doc    = "Creates count new instances of svc, pending, with fresh ids: the scheduler places them."
  params = ["count"]
  fresh "id" { count = "count" }
  emit "observed/instance/{id}/service" { value = "svc" }
  emit "observed/instance/{id}/state" { value = "'pending'" }
}

counts {
  doc      = "Instances of svc waiting for a placement (pending), or stopping (running, placement gone)."
  params   = ["svc"]
  over     = "unplaced"
  waiting  = "state == 'pending'"
  stopping = "state == 'running'"
}

counts {
  doc             = "Placed instances of svc on nodes that have held a lease, as the engine placed them."
  params          = ["svc"]
  over            = ["live", "spec"]
  placed          = "counted"
  starting        = "state == 'pending' && reached"
  old             = "counted && replaced"
  renewed         = "counted && !replaced"
  healthy         = "serving && reached"
  renewed_healthy = "serving && reached && iimage.hasValue() && !replaced"
}

rule "create_instances" {
  doc       = "While a service has fewer live instances than effective/service/{svc}/instances, create the missing ones as pending instances with fresh ids; none while the restart policy holds the service after a failure (restart.hcl)."
  principal = "instances"
  # After count_failure: a failure noted in this round holds its replacement.
  after = ["count_failure"]
  match { want = "effective/service/{svc}/instances" }
  absent = ["observed/service/{svc}/restart/hold"]
  when   = "want > waiting + placed"
  do "create_pending" { count = "want - waiting - placed" }
}

rule "cancel_waiting_extras" {
  doc       = "While a service has more live instances than its target (plus update/max_extra while some are being replaced), stop its extra unplaced pending instances, all in one round: they cost nothing to stop."
  principal = "instances"
  after     = ["create_instances"]
  match { want = "effective/service/{svc}/instances" }
  optional { extra = "desired/service/{svc}/update/max_extra" }
  when = "waiting + placed > allowed && waiting > 0"
  choose "victim" {
    over = "unplaced"
    filters { pending = "state == 'pending'" }
    pick = "math.least(waiting, waiting + placed - allowed)"
  }
  emit "observed/instance/{id}/state" { value = "'stopped'" }
}

rule "stop_placed_extras" {
  doc       = "While a service has more live placed instances than its target (plus update/max_extra while some are being replaced) and none waiting, stop every extra in one round by deleting their placements once none is still starting: unhealthy first, then the newest, never the last healthy one; the stops commit only on counts that still hold."
  principal = "reconcile"
  match { want = "effective/service/{svc}/instances" }
  optional { extra = "desired/service/{svc}/update/max_extra" }
  guard = ["placed", "healthy"]
  # A placed instance still pending is waited for: deleting its placement would only
  # have it placed again (nothing marks it stopped); once it runs it is the newest.
  when = "placed > allowed && waiting == 0 && starting == 0"
  choose "victim" {
    over = "live"
    optional {
      health  = "observed/instance/{id}/health"
      started = "observed/instance/{id}/started_at"
    }
    filters {
      live             = "active && nstate != 'unreachable'"
      believed         = "believed"
      not_last_healthy = "want == 0 || healthy > 1 || !serving"
    }
    order = [desc("state == 'pending'"), desc("health.orValue('unknown') != 'healthy'"), desc("started.orValue(timestamp(0))")]
    pick  = "placed - allowed"
  }
  delete "placement/instance/{id}" {}
  delete "placement/node/{node}/{id}" {}
}
