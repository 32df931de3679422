# Health replacement. The agent reports each check's result as it changes, so
# N consecutive failed checks are one unhealthy report lasting N-1 intervals.
rule "note_unhealthy" {
  doc       = "A running instance reported unhealthy gets observed/instance/{id}/unhealthy_since: when the policy first saw it so."
  principal = "failure"
  match {
    state  = "observed/instance/{id}/state"
    health = "observed/instance/{id}/health"
  }
  absent = ["observed/instance/{id}/unhealthy_since"]
  when   = "state == 'running' && health == 'unhealthy'"
  emit "observed/instance/{id}/unhealthy_since" { value = "now" }
}

rule "forget_unhealthy" {
  doc       = "An instance no longer reported running and unhealthy loses observed/instance/{id}/unhealthy_since: its failed checks were not consecutive."
  principal = "failure"
  after     = ["note_unhealthy"]
  match { since = "observed/instance/{id}/unhealthy_since" }
  optional {
    state  = "observed/instance/{id}/state"
    health = "observed/instance/{id}/health"
  }
  when = "state.orValue('') != 'running' || health.orValue('') != 'unhealthy'"
  delete "observed/instance/{id}/unhealthy_since" {}
}

rule "retire_unhealthy" {
  doc       = "An instance unhealthy for its service's health/failures consecutive checks (default 3, one per health/interval, default 10s) is marked retiring: it is to be replaced."
  principal = "failure"
  match {
    since = "observed/instance/{id}/unhealthy_since"
    clock = "observed/clock"
    svc   = "observed/instance/{id}/service"
  }
  absent = ["observed/instance/{id}/retiring"]
  optional {
    failures = "desired/service/{svc}/health/failures"
    interval = "desired/service/{svc}/health/interval"
  }
  when = "(clock - since).getMilliseconds() >= (failures.orValue(3) - 1) * interval.orValue(duration('10s')).getMilliseconds()"
  emit "observed/instance/{id}/retiring" { value = "'unhealthy'" }
}

rule "note_failed" {
  doc       = "A failed instance gets observed/instance/{id}/failed_at: when the policy first saw it failed. The firing records the agent's reason and exit status (reports.hcl)."
  principal = "failure"
  match { state = "observed/instance/{id}/state" }
  optional {
    reason = "observed/instance/{id}/reason"
    exit   = "observed/instance/{id}/exit_status"
  }
  absent = ["observed/instance/{id}/failed_at"]
  when   = "state == 'failed'"
  emit "observed/instance/{id}/failed_at" { value = "now" }
}

counts {
  doc             = "Placed instances of svc pending or running an older image or spec, wherever placed."
  params          = ["svc"]
  over            = ["placement", "spec"]
  placed_outdated = "runs_older"
}

rule "release_failed" {
  doc       = "A failed instance (not live, so already replaced) loses its placement, so its agent removes the container: at once while no instance of its service runs an older image; during a rollout, which it halts, after 60 seconds, so the rollout is retried at that pace."
  principal = "reconcile"
  after     = ["schedule", "stop_placed_extras", "stop_replaced"]
  over      = "placement"
  match {
    image  = "desired/service/{svc}/image"
    failed = "observed/instance/{id}/failed_at"
    clock  = "observed/clock"
  }
  when = "state == 'failed' && (placed_outdated == 0 || clock - failed >= duration('60s'))"
  delete "placement/instance/{id}" {}
  delete "placement/node/{node}/{id}" {}
}
