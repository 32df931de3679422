rule "count_instances" {
  doc       = "Each service's effective count is the number of its instances (a view over an aggregate joined on a value)."
  principal = "intent-resolver"
  match {
    svc = "desired/service/{name}"
  }
  aggregate "n" {
    match {
      name = "observed/instance/{i}/service"
    }
    count = true
  }
  derive "effective/service/{name}/instances" {
    value = "n"
  }
}
