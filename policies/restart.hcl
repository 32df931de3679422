# Restart policy: a failed instance is replaced after a backoff, so that an image
# that cannot be pulled costs a bounded number of attempts a minute, not a storm
# (compare Kubernetes' CrashLoopBackOff). Time is the engine's now, as failed_at is:
# a failure and its hold are stamped in one round, so no hold is over when written.
rule "count_failure" {
  doc       = "A failure of an instance, noted after the service's last counted one, is counted: observed/service/{svc}/restart/failures grows by one, restart/reason holds the agent's reason, and restart/hold holds new instances back for restart/delay (default 1s), doubled for each consecutive failure past restart/attempts (default 1), at most restart/max_delay (default 5m)."
  principal = "instances"
  after     = ["note_failed"]
  match {
    failed = "observed/instance/{id}/failed_at"
    svc    = "observed/instance/{id}/service"
    # A deleted service's old failures are not counted (delete.hcl forgets them).
    exists = "desired/service/{svc}"
  }
  optional {
    reason    = "observed/instance/{id}/reason"
    exit      = "observed/instance/{id}/exit_status"
    image     = "observed/instance/{id}/image"
    current   = "desired/service/{svc}/image"
    count     = "observed/service/{svc}/restart/failures"
    last      = "observed/service/{svc}/restart/last_failure"
    attempts  = "desired/service/{svc}/restart/attempts"
    delay     = "desired/service/{svc}/restart/delay"
    max_delay = "desired/service/{svc}/restart/max_delay"
  }
  let {
    failures = "count.orValue(0) + 1"
    # Doublings past the fast attempts; 2^20 delays exceed any max_delay.
    doublings = "math.least(20, math.greatest(0, failures - attempts.orValue(1)))"
    wait_ms   = "math.least(max_delay.orValue(duration('5m')).getMilliseconds(), math.bitShiftLeft(delay.orValue(duration('1s')).getMilliseconds(), doublings))"
  }
  when = "!last.hasValue() || failed > last.value()"
  emit "observed/service/{svc}/restart/failures" { value = "failures" }
  emit "observed/service/{svc}/restart/last_failure" { value = "failed" }
  emit "observed/service/{svc}/restart/reason" { value = "reason.orValue(exit.hasValue() ? 'exited with status %d'.format([exit.value()]) : 'failed; its agent gave no reason')" }
  emit "observed/service/{svc}/restart/image" { value = "image.orValue(current.orValue('unknown'))" }
  # Whole seconds: the engine evaluates the passing of time once a second.
  emit "observed/service/{svc}/restart/hold" { value = "timestamp(int(failed) + math.greatest(1, wait_ms / 1000))" }
}

rule "restart_on_change" {
  doc       = "A service whose image is no longer the one its last failure ran starts over at once: the hold is lifted and the failures forgotten, so a fixed image is tried without waiting out the backoff."
  principal = "instances"
  after     = ["count_failure", "end_hold"]
  match {
    failed = "observed/service/{svc}/restart/image"
    image  = "desired/service/{svc}/image"
  }
  when = "failed != image"
  delete "observed/service/{svc}/restart/hold" {}
  delete "observed/service/{svc}/restart/failures" {}
  delete "observed/service/{svc}/restart/reason" {}
  delete "observed/service/{svc}/restart/image" {}
}

rule "forget_failures" {
  doc       = "A service without a failure for restart/interval (default 10m) starts over: its failure count and last reason are forgotten, so its next failure waits restart/delay again."
  principal = "instances"
  after     = ["count_failure", "restart_on_change"]
  match {
    count = "observed/service/{svc}/restart/failures"
    last  = "observed/service/{svc}/restart/last_failure"
  }
  optional { interval = "desired/service/{svc}/restart/interval" }
  when = "now - last >= interval.orValue(duration('10m'))"
  delete "observed/service/{svc}/restart/failures" {}
  delete "observed/service/{svc}/restart/reason" {}
}

rule "end_hold" {
  doc       = "A service's restart/hold is lifted once it has passed: its failed instances are replaced."
  principal = "instances"
  after     = ["count_failure"]
  match { hold = "observed/service/{svc}/restart/hold" }
  when = "now >= hold"
  delete "observed/service/{svc}/restart/hold" {}
}
