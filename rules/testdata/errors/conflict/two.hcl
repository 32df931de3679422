rule "user_wins" {
  doc       = "The effective count is the user's intent."
  principal = "intent-resolver"
  match {
    n = "intent/user/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}

rule "policy_wins" {
  doc       = "The effective count is the policy's intent."
  principal = "intent-resolver"
  match {
    n = "intent/policy/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
