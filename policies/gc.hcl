# Garbage collection: an instance that stopped (or failed) and has no
# placement any more is history. Its facts are kept for an hour, so that
# `ccattler get instances`, `why` and the agents' last reports can still be
# read, then deleted; a failed one sooner once five newer failures of its
# service are kept. Time comes from observed/clock (see failure.hcl).
rule "note_stopped" {
  doc       = "An instance stopped or failed without a placement gets observed/instance/{id}/stopped_at: the clock when it was first seen so."
  principal = "gc"
  match {
    state = "observed/instance/{id}/state"
    clock = "observed/clock"
  }
  absent = ["placement/instance/{id}", "observed/instance/{id}/stopped_at"]
  when   = "state == 'stopped' || state == 'failed'"
  emit "observed/instance/{id}/stopped_at" { value = "clock" }
}

rule "collect_stopped" {
  doc       = "The facts of an instance stopped for longer than an hour, without a placement, are deleted; those of a failed one as soon as its service has five newer failed instances."
  principal = "gc"
  after     = ["create_instances", "cancel_waiting_extras", "cancel_deleted", "replace_first", "note_stopped", "note_failed", "note_unhealthy", "forget_unhealthy", "retire_unhealthy"]
  match {
    stopped = "observed/instance/{id}/stopped_at"
    state   = "observed/instance/{id}/state"
    clock   = "observed/clock"
    svc     = "observed/instance/{id}/service"
  }
  absent = ["placement/instance/{id}"]
  optional { failed = "observed/instance/{id}/failed_at" }
  # Failed instances of the service noted after this one: a crash loop
  # leaves only the newest few, whatever its pace.
  aggregate "newer_failures" {
    match {
      svc     = "observed/instance/{i}/service"
      ifailed = "observed/instance/{i}/failed_at"
    }
    where = "failed.hasValue() && ifailed > failed.value()"
    count = true
  }
  let {
    retention = "duration('1h')"
    keep      = "5"
  }
  when = "(state == 'stopped' || state == 'failed') && (clock - stopped > retention || (state == 'failed' && newer_failures >= keep))"
  delete "observed/instance/{id}" {}
  delete "observed/instance/{id}/" {}
}
