# Instances: keep as many live instances of each service as its effective
# target. An instance is live while it is pending and not yet placed, or
# pending or running on a node that is not unreachable. An instance whose
# placement was deleted is being stopped and no longer counts. Counts and
# choices rest on what the engine writes (placement/, a node marked leased
# by failure.hcl) and on reports from the placed node only: an instance on a
# node that never held a lease, or whose report names another node than its
# placement, is not counted and never chosen. The definitions below are
# shared by every rule of the set (rollout.hcl and health.hcl use them too).
relation "instance" {
  doc = "An instance of service svc, with its state."
  match {
    svc   = "observed/instance/{i}/service"
    state = "observed/instance/{i}/state"
  }
}

relation "placement" {
  doc  = "An instance with its placement."
  over = "instance"
  match { node = "placement/instance/{i}" }
}

relation "leased" {
  doc  = "A placed instance on a node that has held a lease, with the node its agent reports."
  over = "placement"
  match { held = "observed/node/{node}/leased" }
  optional { inode = "observed/instance/{i}/node" }
}

relation "live" {
  doc  = "A placed instance on a node that has held a lease, with the node's state."
  over = "leased"
  match { nstate = "observed/node/{node}/state" }
}

relation "spec" {
  doc = "What the agent reports of an instance's health and spec, and its service's current spec."
  optional {
    health   = "observed/instance/{i}/health"
    iimage   = "observed/instance/{i}/image"
    retiring = "observed/instance/{i}/retiring"
    icpu     = "observed/instance/{i}/resources/cpu"
    imem     = "observed/instance/{i}/resources/memory"
    ispec    = "observed/instance/{i}/spec_digest"
    dimage   = "desired/service/{svc}/image"
    dcpu     = "desired/service/{svc}/resources/cpu"
    dmem     = "desired/service/{svc}/resources/memory"
    dspec    = "desired/service/{svc}/spec_digest"
  }
}

let {
  # A report is believed only from the node of the placement.
  believed = "inode.orValue(node) == node"
  active   = "state == 'pending' || state == 'running'"
  counted  = "active && nstate != 'unreachable' && believed"
  serving  = "state == 'running' && health.orValue('unknown') == 'healthy'"
  up       = "serving && nstate != 'unreachable' && believed"
  # The instance reports an image other than its service's.
  other_image = "dimage.hasValue() && iimage.hasValue() && iimage.value() != dimage.value()"
  # The instance reports resources or a spec digest other than its service's.
  drifted  = "(icpu.hasValue() && icpu.value() != dcpu.orValue(0.0)) || (imem.hasValue() && imem.value() != dmem.orValue(0)) || (ispec.hasValue() && ispec.value() != dspec.orValue(''))"
  replaced = "retiring.hasValue() || other_image || drifted"
  # While instances are being replaced (rollout.hcl), update/max_extra more may live.
  allowed  = "want + (old > 0 ? extra.orValue(1) : 0)"
}

counts {
  doc     = "Instances of svc waiting for a placement (pending), or stopping (running, placement gone)."
  params  = ["svc"]
  over    = "instance"
  absent  = ["placement/instance/{i}"]
  waiting  = "state == 'pending'"
  stopping = "state == 'running'"
}

counts {
  doc      = "Placed instances of svc on nodes that have held a lease, as the engine placed them."
  params   = ["svc"]
  over     = ["live", "spec"]
  placed   = "counted"
  starting = "state == 'pending' && nstate != 'unreachable' && believed"
  old      = "counted && replaced"
  renewed  = "counted && !replaced"
  healthy  = "up"
  renewed_healthy = "up && iimage.hasValue() && !replaced"
}

rule "create_instances" {
  doc       = "While a service has fewer live instances than effective/service/{svc}/instances, create the missing ones as pending instances with fresh ids; none while the restart policy holds the service after a failure (restart.hcl)."
  principal = "instances"
  # After count_failure: a failure noted in this round holds its replacement.
  after = ["count_failure"]
  match { want = "effective/service/{svc}/instances" }
  absent = ["observed/service/{svc}/restart/hold"]
  let { missing = "want - waiting - placed" }
  when = "missing > 0"
  fresh "id" { count = "missing" }
  emit "observed/instance/{id}/service" { value = "svc" }
  emit "observed/instance/{id}/state" { value = "'pending'" }
}

rule "cancel_waiting_extras" {
  doc       = "While a service has more live instances than its target (plus update/max_extra while some are being replaced), stop its extra unplaced pending instances, all in one round: they cost nothing to stop."
  principal = "instances"
  after     = ["create_instances"]
  match { want = "effective/service/{svc}/instances" }
  optional { extra = "desired/service/{svc}/update/max_extra" }
  when = "waiting + placed > allowed && waiting > 0"
  choose "victim" {
    match {
      svc   = "observed/instance/{v}/service"
      state = "observed/instance/{v}/state"
    }
    absent = ["placement/instance/{v}"]
    filters {
      pending = "state == 'pending'"
    }
    # Every extra at once, from the unplaced pending ones alone.
    pick = "math.least(waiting, waiting + placed - allowed)"
  }
  emit "observed/instance/{v}/state" { value = "'stopped'" }
}

rule "stop_placed_extras" {
  doc       = "While a service has more live placed instances than its target (plus update/max_extra while some are being replaced) and none waiting, stop every extra in one round by deleting their placements once none is still starting: unhealthy first, then the newest, never the last healthy one; the stops commit only on counts that still hold."
  principal = "reconcile"
  match { want = "effective/service/{svc}/instances" }
  optional { extra = "desired/service/{svc}/update/max_extra" }
  # The stops are decided on these counts: they commit only while what
  # they counted holds (a write of the round they counted included).
  guard = ["placed", "healthy"]
  # A placed instance still pending is waited for: deleting its placement
  # would only have it placed again (nothing marks it stopped), and once it
  # runs it is the newest, so it goes first.
  when = "placed > allowed && waiting == 0 && starting == 0"
  choose "victim" {
    match {
      svc    = "observed/instance/{v}/service"
      vstate = "observed/instance/{v}/state"
      vnode  = "placement/instance/{v}"
      vnst   = "observed/node/{vnode}/state"
      vheld  = "observed/node/{vnode}/leased"
    }
    optional {
      vhealth  = "observed/instance/{v}/health"
      vstarted = "observed/instance/{v}/started_at"
      vinode   = "observed/instance/{v}/node"
    }
    filters {
      live             = "(vstate == 'pending' || vstate == 'running') && vnst != 'unreachable'"
      believed         = "vinode.orValue(vnode) == vnode"
      not_last_healthy = "want == 0 || healthy > 1 || vhealth.orValue('unknown') != 'healthy' || vstate != 'running'"
    }
    # Pending before unhealthy before healthy; among equals the newest start goes first.
    order = [
      desc("vstate == 'pending'"),
      desc("vhealth.orValue('unknown') != 'healthy'"),
      desc("vstarted.orValue(timestamp('1970-01-01T00:00:00Z'))"),
    ]
    # Every extra at once: the ones kept are the first allowed in the
    # reverse order, the healthy and oldest.
    pick = "placed - allowed"
  }
  delete "placement/instance/{v}" {}
}
