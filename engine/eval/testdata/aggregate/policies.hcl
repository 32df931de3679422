rule "resolve_intent" {
  doc       = "The effective instance count: the policy layer's intent, else the autoscaler's, else the user's."
  principal = "intent-resolver"
  match {
    user = "intent/user/service/{name}/instances"
  }
  optional {
    auto   = "intent/autoscaler/service/{name}/instances"
    policy = "intent/policy/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "policy.orValue(auto.orValue(user))"
  }
}

rule "create_instances" {
  doc       = "While a service has fewer live instances than its effective count, create pending ones under fresh ids, all at once."
  principal = "instances"
  match {
    want = "effective/service/{name}/instances"
  }
  aggregate "live" {
    match {
      name  = "observed/instance/{i}/service"
      state = "observed/instance/{i}/state"
    }
    where = "state in ['pending', 'running']"
    count = true
  }
  when = "live < want"
  fresh "id" {
    count = "want - live"
  }
  emit "observed/instance/{id}/service" {
    value = "name"
  }
  emit "observed/instance/{id}/state" {
    value = "'pending'"
  }
}
