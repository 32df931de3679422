rule "divide" {
  doc       = "Divides by a count that is zero: a runtime error, reported by name."
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "10 / (n - n)"
  }
}

rule "fine" {
  doc       = "Places every pending instance on node-1; evaluated although divide fails."
  principal = "scheduler"
  match {
    s = "observed/instance/{id}/state"
  }
  when = "s == 'pending'"
  emit "placement/instance/{id}" {
    value = "'node-1'"
  }
}

rule "bad_value" {
  doc       = "Writes a value its key's type rejects: an error naming the key."
  principal = "network"
  match {
    s = "observed/instance/{id}/state"
    v = "observed/instance/{id}/service"
  }
  derive "endpoint/service/{v}/{id}" {
    value = "{'ip': 'not-an-ip', 'port': 1}"
  }
}

rule "place_some" {
  doc       = "An action whose guard fails at run time for one binding only (a service named with three letters)."
  principal = "reconcile"
  after     = ["fine"]
  match {
    s   = "observed/instance/{id}/state"
    svc = "observed/instance/{id}/service"
  }
  when = "s == 'running' && 12 / (size(svc) - 3) > 0"
  emit "placement/instance/{id}" {
    value = "'node-2'"
  }
}
