rule "mark_unreachable" {
  doc       = "A node whose lease is gone while it is alive becomes unreachable; writing that makes the guard false."
  principal = "failure"
  match {
    state = "observed/node/{n}/state"
  }
  absent = ["lease/node/{n}"]
  when   = "state == 'alive'"
  emit "observed/node/{n}/state" {
    value = "'unreachable'"
  }
}

rule "flag_lonely_service" {
  doc       = "A service with no endpoint at all gets a policy intent of 1 (an existential absence: any instance id)."
  principal = "policy"
  match {
    svc = "desired/service/{name}"
  }
  absent = ["endpoint/service/{name}/{any}", "intent/policy/service/{name}/instances"]
  emit "intent/policy/service/{name}/instances" {
    value = "1"
  }
}
