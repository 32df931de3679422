rule "drain" {
  doc       = "Drain every alive node (half of a deliberately broken pair)."
  principal = "failure"
  match {
    s = "observed/node/{n}/state"
  }
  when = "s == 'alive'"
  emit "observed/node/{n}/state" {
    value = "'draining'"
  }
}

rule "undrain" {
  doc       = "Revive every draining node (the other half): together with drain it flips the key forever."
  principal = "failure"
  after     = ["drain"]
  match {
    s = "observed/node/{n}/state"
  }
  when = "s == 'draining'"
  emit "observed/node/{n}/state" {
    value = "'alive'"
  }
}

rule "bystander" {
  doc       = "An unrelated rule: the round goes on for it while the pair is stopped."
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
