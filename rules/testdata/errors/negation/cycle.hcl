# A view that tests the absence of an action's output, read by that action:
# the view would depend on its own absence. Reported once, at the action's
# read that closes the cycle, naming every rule of it.
rule "autoscale_unless_policy" {
  doc       = "The autoscaler wants the policy's count if there is one, else the user's."
  principal = "admin"
  match {
    n = "intent/user/service/{name}/instances"
  }
  optional {
    p = "intent/policy/service/{name}/instances"
  }
  emit "intent/autoscaler/service/{name}/instances" {
    value = "p.orValue(n)"
  }
}

rule "policy_until_autoscaled" {
  doc       = "The policy follows the user while the autoscaler has said nothing (a view)."
  principal = "admin"
  match {
    n = "intent/user/service/{name}/instances"
  }
  absent = ["intent/autoscaler/service/{name}/instances"]
  derive "intent/policy/service/{name}/instances" {
    value = "n"
  }
}

# Not in a cycle with a view's negation: an action reading a view that
# reads the action's output positively is fine.
rule "note_effective" {
  doc       = "The autoscaler's intent is recorded as a reason."
  principal = "admin"
  match {
    a = "intent/autoscaler/service/{name}/instances"
  }
  optional {
    e = "observed/service/{name}/autoscale/recommendation"
  }
  emit "observed/service/{name}/restart/reason" {
    value = "'autoscaled'"
  }
}

rule "recommend" {
  doc       = "A view of the reasons."
  principal = "admin"
  match {
    r = "observed/service/{name}/restart/reason"
  }
  derive "observed/service/{name}/autoscale/recommendation" {
    value = "1"
  }
}
