rule "publish_endpoint" {
  doc       = "An endpoint exists for every running, healthy instance of a service that exposes a port."
  principal = "network"
  match {
    svc    = "observed/instance/{id}/service"
    state  = "observed/instance/{id}/state"
    ip     = "observed/instance/{id}/ip"
    expose = "desired/service/{svc}/expose/{port}"
  }
  optional {
    health = "observed/instance/{id}/health"
  }
  when = "state == 'running' && health.orValue('unknown') == 'healthy'"
  derive "endpoint/service/{svc}/{id}" {
    value = "{'ip': ip, 'port': int(port)}"
  }
}
