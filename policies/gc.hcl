# Garbage collection: an instance's history is kept an hour, so that
# `ccattler get instances`, `why` and the agents' last reports can still be read.
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
  over      = "unplaced"
  match {
    stopped = "observed/instance/{id}/stopped_at"
    clock   = "observed/clock"
  }
  optional { failed = "observed/instance/{id}/failed_at" }
  # Failures noted after this one: a crash loop leaves the newest few, whatever its pace.
  aggregate "newer_failures" {
    match {
      svc     = "observed/instance/{i}/service"
      ifailed = "observed/instance/{i}/failed_at"
    }
    where = "failed.hasValue() && ifailed > failed.value()"
    count = true
  }
  when = "(state == 'stopped' || state == 'failed') && (clock - stopped > duration('1h') || (state == 'failed' && newer_failures >= 5))"
  delete "observed/instance/{id}" {}
  delete "observed/instance/{id}/" {}
}
