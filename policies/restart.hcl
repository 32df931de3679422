# Restart policy: a failed instance is replaced, but not at once, so that an
# image that cannot be pulled or a port that is taken costs a bounded
# number of attempts a minute instead of a storm (compare Kubernetes'
# CrashLoopBackOff and Nomad's restart stanza). A service's file may say
#   restart { delay = "1s", max_delay = "5m", attempts = 1, interval = "10m" }
# (the defaults):
#   1. count_failure counts each failure once, when the failure policy
#      notes it (failed_at, health.hcl): failures noted together count as
#      one. It keeps the last reason the agent reported, and holds the
#      service's new instances until restart/hold: delay for the first
#      `attempts` consecutive failures, doubling with each one after, up to
#      max_delay;
#   2. create_instances (instances.hcl) creates nothing while the hold
#      stands; end_hold lifts it when the clock passes it;
#   3. forget_failures starts the service over from delay once it has gone
#      `interval` without a failure; restart_on_change at once when the
#      service is given another image than the one that failed.
# The scheduler prefers nodes where the service has not failed
# (scheduler.hcl), and only the newest failed instances of a service are
# kept (gc.hcl). Time is the engine's now, as failed_at is: the failure and
# its hold are stamped in one round, so a hold is never already over when
# it is written, and only services that failed are evaluated as time passes.
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
    wait_ms   = "math.least(max_delay.orValue(duration('5m')).getMilliseconds(), delay.orValue(duration('1s')).getMilliseconds() * [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576][doublings])"
  }
  when = "!last.hasValue() || failed > last.value()"
  emit "observed/service/{svc}/restart/failures" { value = "failures" }
  emit "observed/service/{svc}/restart/last_failure" { value = "failed" }
  emit "observed/service/{svc}/restart/reason" { value = "reason.orValue(exit.hasValue() ? 'exited with status %d'.format([exit.value()]) : 'failed; its agent gave no reason')" }
  emit "observed/service/{svc}/restart/image" {
    # The agent reports the image a failed instance tried; the service's if it did not.
    value = "image.orValue(current.orValue('unknown'))"
  }
  emit "observed/service/{svc}/restart/hold" {
    # Whole seconds: the engine evaluates the passing of time once a second.
    value = "timestamp(int(failed) + math.greatest(1, wait_ms / 1000))"
  }
}

rule "end_hold" {
  doc       = "A service's restart/hold is lifted once it has passed: its failed instances are replaced."
  principal = "instances"
  after     = ["count_failure"]
  match { hold = "observed/service/{svc}/restart/hold" }
  when = "now >= hold"
  delete "observed/service/{svc}/restart/hold" {}
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
