rule "summarize_intents" {
  doc       = "A test of min, max and sum: the effective count is max + min + sum of the intent layers' counts."
  principal = "intent-resolver"
  match {
    svc = "desired/service/{name}"
  }
  aggregate "hi" {
    match {
      v = "intent/{layer}/service/{name}/instances"
    }
    max = "v"
  }
  aggregate "lo" {
    match {
      v = "intent/{layer}/service/{name}/instances"
    }
    min = "v"
  }
  aggregate "total" {
    match {
      v = "intent/{layer}/service/{name}/instances"
    }
    where = "layer != 'policy'"
    sum   = "v"
  }
  derive "effective/service/{name}/instances" {
    value = "hi.orValue(0) + lo.orValue(0) + total"
  }
}

rule "gc_stopped" {
  doc       = "The facts of an instance stopped for more than an hour are removed."
  principal = "gc"
  match {
    state   = "observed/instance/{id}/state"
    started = "observed/instance/{id}/started_at"
  }
  when = "state == 'stopped' && now - started > duration('1h')"
  delete "observed/instance/{id}/state" {}
  delete "observed/instance/{id}/started_at" {}
}
