rule "resolve_intent" {
  doc       = "The effective count is the user's intent."
  principal = "intent-resolver"
  match {
    want = "intent/user/service/{name}/instances"
  }
  when = "want > 'three'"
  derive "effective/service/{name}/instances" {
    value = <<EOT
want +
  unknown_name
EOT
  }
}
