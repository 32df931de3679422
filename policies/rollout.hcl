# Rolling replacement. Counts rest on placements on nodes that held a lease
# and on reports from the placed node (instances.hcl). An instance is replaced when it runs an image,
# resources or a command, args, env or labels other than its service's
# current ones (the agent starts every instance with the service's spec of
# the moment and reports its image in observed/instance/{id}/image, its cpu
# and memory in resources/cpu|memory, and the service's spec_digest it read
# with the command, args, env and labels in spec_digest: apply writes that
# digest with them; an instance without them reported is left as it is), or
# when the health policy marked it retiring. Replacement is new first:
#   1. replace_first creates new instances while the service has instances to
#      replace, up to update/max_extra (default 1) above its target and until
#      the target's worth of new ones exist;
#   2. stop_replaced stops an old one only when a new one is running and
#      healthy in its place (old + new healthy > target), and never takes the
#      running, healthy instances below target - update/max_unavailable
#      (default 0). With max_extra = 0 there is no room to start first: an old
#      one is stopped when no new one is still starting, within max_unavailable.
# A rollout halts where it is when an instance of the new image fails or
# reports unhealthy: no more new instances, no more old ones stopped, the old
# ones keep serving. A failed instance is reported with the image it ran or
# tried to start; one reported without (an older agent) is counted as the new
# image's (halting is the safe side). Failed instances keep their
# placement while a rollout is under way, as its evidence; release_failed
# (health.hcl) clears them once no instance runs an older image. observed/service/{name}/rollout says so and why while
# any instance runs an older image, and is what `ccattler get services` shows
# as updated/total (the actions compute
# the same condition themselves: a view may not feed back into the actions it
# watches). Changing the image again (e.g. back) resumes.
let {
  halted = "outdated > 0 && bad > 0"
  # Pending or running, on an older image or spec.
  runs_older = "active && iimage.hasValue() && (other_image || drifted)"
}

counts {
  doc      = "Instances of svc on nodes that have held a lease, by image and spec."
  params   = ["svc"]
  over     = ["leased", "spec"]
  outdated = "believed && runs_older"
  bad      = "believed && !other_image && !drifted && (state == 'failed' || (state == 'running' && health.orValue('unknown') == 'unhealthy'))"
  updated  = "believed && serving && iimage.hasValue() && !other_image && !drifted"
}

rule "rollout_status" {
  doc       = "While instances of a service run an older image, observed/service/{svc}/rollout holds its image, how many running, healthy instances run it of the target, and whether the rollout progresses or is halted, and why; it is gone once none runs an older image."
  principal = "instances"
  match {
    want  = "effective/service/{svc}/instances"
    image = "desired/service/{svc}/image"
  }
  let {
    phase  = "halted ? 'halted' : 'progressing'"
    reason = "halted ? '%d instance(s) of %s failed or are unhealthy; %d running an older image keep serving'.format([bad, image, outdated]) : ''"
  }
  when = "outdated > 0"
  derive "observed/service/{svc}/rollout" { value = "{'image': image, 'updated': updated, 'total': want, 'state': phase, 'reason': reason}" }
}

rule "replace_first" {
  doc       = "While a service has instances to replace (an older image, or retiring) and its rollout is not halted, create new instances first: up to update/max_extra (default 1) above the target, until the target's worth of new ones exist."
  principal = "instances"
  after     = ["create_instances", "cancel_waiting_extras"]
  match {
    want  = "effective/service/{svc}/instances"
    image = "desired/service/{svc}/image"
  }
  optional { max_extra = "desired/service/{svc}/update/max_extra" }
  let {
    extra   = "max_extra.orValue(1)"
    # An instance whose placement is gone runs until its agent stops it:
    # it still counts against max_extra.
    live    = "waiting + placed + stopping"
    renewed = "waiting + placed - old"
  }
  when = "old > 0 && !halted && live < want + extra && renewed < want"
  fresh "id" { count = "math.least(want + extra - live, want - renewed)" }
  emit "observed/instance/{id}/service" { value = "svc" }
  emit "observed/instance/{id}/state" { value = "'pending'" }
}

rule "stop_replaced" {
  doc       = "Stop an instance to replace (unhealthy ones first) once a new one is running and healthy in its place, keeping running, healthy instances at or above the target less update/max_unavailable (default 0); nothing while the rollout is halted."
  principal = "reconcile"
  after     = ["stop_placed_extras", "schedule"]
  match {
    want  = "effective/service/{svc}/instances"
    image = "desired/service/{svc}/image"
  }
  optional {
    dcpu = "desired/service/{svc}/resources/cpu"
    dmem = "desired/service/{svc}/resources/memory"
    dspec = "desired/service/{svc}/spec_digest"
    max_extra       = "desired/service/{svc}/update/max_extra"
    max_unavailable = "desired/service/{svc}/update/max_unavailable"
  }
  let {
    extra       = "max_extra.orValue(1)"
    unavailable = "max_unavailable.orValue(0)"
    covered     = "old + renewed_healthy > want"
    room        = "extra == 0 && waiting + renewed == renewed_healthy"
  }
  when = "old > 0 && !halted && (covered || room)"
  choose "victim" {
    match {
      svc    = "observed/instance/{v}/service"
      vstate = "observed/instance/{v}/state"
      vnode  = "placement/instance/{v}"
      vnst   = "observed/node/{vnode}/state"
      vheld  = "observed/node/{vnode}/leased"
    }
    optional {
      vinode    = "observed/instance/{v}/node"
      vhealth   = "observed/instance/{v}/health"
      vimage    = "observed/instance/{v}/image"
      vretiring = "observed/instance/{v}/retiring"
      vcpu      = "observed/instance/{v}/resources/cpu"
      vmem      = "observed/instance/{v}/resources/memory"
      vspec     = "observed/instance/{v}/spec_digest"
    }
    let {
      serving = "vstate == 'running' && vhealth.orValue('unknown') == 'healthy'"
    }
    filters {
      replaced  = "(vstate == 'pending' || vstate == 'running') && vnst != 'unreachable' && (vretiring.hasValue() || vimage.orValue(image) != image || (vcpu.hasValue() && vcpu.value() != dcpu.orValue(0.0)) || (vmem.hasValue() && vmem.value() != dmem.orValue(0)) || (vspec.hasValue() && vspec.value() != dspec.orValue('')))"
      available = "!serving || healthy - 1 >= want - unavailable"
      believed  = "vinode.orValue(vnode) == vnode"
    }
    score = "serving ? 0.0 : 1.0"
  }
  delete "placement/instance/{v}" {}
}
