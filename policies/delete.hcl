# A deleted service is gone, its instances and restart state with it (scaling to 0 needs none of this).
rule "stop_deleted" {
  doc       = "An instance of a service that no longer exists (desired/service/{svc} is gone) loses its placement: its agent stops it and its endpoint goes."
  principal = "reconcile"
  after     = ["schedule", "stop_placed_extras", "stop_replaced", "release_failed"]
  match {
    node = "placement/instance/{id}"
    svc  = "observed/instance/{id}/service"
  }
  absent = ["desired/service/{svc}"]
  delete "placement/instance/{id}" {}
  delete "placement/node/{node}/{id}" {}
}

rule "cancel_deleted" {
  doc       = "A pending, unplaced instance of a service that no longer exists is stopped: it will never be placed."
  principal = "instances"
  after     = ["create_instances", "cancel_waiting_extras", "replace_first"]
  over      = "unplaced"
  absent    = ["desired/service/{svc}"]
  when      = "state == 'pending'"
  emit "observed/instance/{id}/state" { value = "'stopped'" }
}

rule "forget_deleted_restarts" {
  doc       = "The restart state of a service that no longer exists is deleted: a service applied again under its name starts afresh."
  principal = "instances"
  after     = ["count_failure", "end_hold", "forget_failures", "restart_on_change"]
  match { last = "observed/service/{svc}/restart/last_failure" }
  absent = ["desired/service/{svc}"]
  delete "observed/service/{svc}/restart/" {}
}
