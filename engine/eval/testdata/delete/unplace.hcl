rule "unplace_stopped" {
  doc       = "A stopped instance loses its placement."
  principal = "scheduler"
  match {
    state = "observed/instance/{id}/state"
    node  = "placement/instance/{id}"
  }
  when = "state == 'stopped'"
  delete "placement/instance/{id}" {}
}
