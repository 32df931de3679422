# Rolling replacement, new instances first (docs/policies.md). A failure or an
# unhealthy report of the new image halts it; a failed instance reported without
# its image counts as the new image's: halting is the safe side.
let {
  halted     = "outdated > 0 && bad > 0"
  runs_older = "active && iimage.hasValue() && (other_image || drifted)"
  up_to_date = "believed && !other_image && !drifted"
}

relation "rollout_target" {
  match {
    want  = "effective/service/{svc}/instances"
    image = "desired/service/{svc}/image"
  }
}

# Instances of svc on nodes that have held a lease, by image and spec.
counts {
  params   = ["svc"]
  over     = ["leased", "spec"]
  outdated = "believed && runs_older"
  bad      = "up_to_date && (state == 'failed' || (state == 'running' && health.orValue('unknown') == 'unhealthy'))"
  updated  = "up_to_date && serving && iimage.hasValue()"
}

rule "replace_first" {
  doc       = "While a service has instances to replace (an older image, or retiring) and its rollout is not halted, create new instances first: up to update/max_extra (default 1) above the target, until the target's worth of new ones exist."
  principal = "instances"
  after     = ["create_instances", "cancel_waiting_extras"]
  over      = "rollout_target"
  optional { max_extra = "desired/service/{svc}/update/max_extra" }
  let {
    # An instance whose placement is gone runs until its agent stops it: it counts.
    room    = "want + max_extra.orValue(1) - waiting - placed - stopping"
    missing = "want - waiting - placed + old"
  }
  when = "old > 0 && !halted && room > 0 && missing > 0"
  do "create_pending" { count = "math.least(room, missing)" }
}

rule "stop_replaced" {
  doc       = "Stop an instance to replace (unhealthy ones first) once a new one is running and healthy in its place, keeping running, healthy instances at or above the target less update/max_unavailable (default 0); nothing while the rollout is halted."
  principal = "reconcile"
  after     = ["stop_placed_extras", "schedule"]
  over      = "rollout_target"
  optional {
    max_extra       = "desired/service/{svc}/update/max_extra"
    max_unavailable = "desired/service/{svc}/update/max_unavailable"
  }
  let {
    covered = "old + renewed_healthy > want"
    room    = "max_extra.orValue(1) == 0 && waiting + renewed == renewed_healthy"
  }
  when = "old > 0 && !halted && (covered || room)"
  choose "victim" {
    over = ["live", "spec"]
    filters {
      replaced  = "active && nstate != 'unreachable' && replaced"
      available = "!serving || healthy - 1 >= want - max_unavailable.orValue(0)"
      believed  = "believed"
    }
    # Not serving first; then the one beside the most instances on the new
    # image, so that the new image ends spread as the old one was.
    order = [desc("!serving"), desc("current_siblings"), desc("siblings")]
  }
  delete "placement/instance/{id}" {}
  delete "placement/node/{node}/{id}" {}
}

rule "rollout_status" {
  doc       = "While instances of a service run an older image, observed/service/{svc}/rollout holds its image, how many running, healthy instances run it of the target, and whether the rollout progresses or is halted, and why; it is gone once none runs an older image."
  principal = "instances"
  over      = "rollout_target"
  when      = "outdated > 0"
  derive "observed/service/{svc}/rollout" { value = "{'image': image, 'updated': updated, 'total': want, 'state': halted ? 'halted' : 'progressing', 'reason': halted ? '%d instance(s) of %s failed or are unhealthy; %d running an older image keep serving'.format([bad, image, outdated]) : ''}" }
}
