# Summaries: facts for people, read by no rule (docs/rules.md, "Summaries"), kept by the
# engine as instances change: `ccattler get services` reads one key per service.
relation "shown" {
  doc = "An instance of service svc with what its agent reports, as `ccattler get services` counts it: an instance without a state or a health still counts as a member."
  match { svc = "observed/instance/{i}/service" }
  optional {
    sstate  = "observed/instance/{i}/state"
    shealth = "observed/instance/{i}/health"
    simage  = "observed/instance/{i}/image"
    sdimage = "desired/service/{svc}/image"
  }
}

counts {
  doc           = "What `ccattler get services` shows of svc's instances: running (state running), healthy (health healthy) and updated (both, reporting the service's desired image)."
  params        = ["svc"]
  over          = "shown"
  shown_running = "sstate.orValue('') == 'running'"
  shown_healthy = "shealth.orValue('') == 'healthy'"
  shown_updated = "sstate.orValue('') == 'running' && shealth.orValue('') == 'healthy' && simage.orValue('') == sdimage.orValue('')"
}

summary "service_summary" {
  doc       = "What `ccattler get services` shows of a service's instances, counted by the engine: running, healthy and updated instances, the target they are counted against (effective, else desired instances), and while some wait for a placement, how many (instances.hcl's waiting)."
  principal = "instances"
  match { service = "desired/service/{svc}" }
  optional {
    effective = "effective/service/{svc}/instances"
    desired   = "desired/service/{svc}/instances"
  }
  derive "observed/service/{svc}/summary" {
    value = "{'running': shown_running, 'healthy': shown_healthy, 'updated': shown_updated, ?'target': effective.or(desired), ?'unplaced': waiting > 0 ? optional.of(waiting) : optional.none()}"
  }
}
