rule "create_instances" {
  doc       = "While a service has fewer pending or running instances than it asks for, create pending ones under fresh ids."
  principal = "instances"
  match {
    want = "desired/service/{name}/instances"
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
