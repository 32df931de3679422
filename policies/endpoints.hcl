# Endpoints: the network view of the services, derived from what agents report.
# The key schema has one endpoint per instance, so an instance of a service
# that exposes several ports is published on the lowest of them.
rule "publish_endpoint" {
  doc       = "endpoint/service/{svc}/{id} holds the address and lowest exposed port of every running, healthy instance placed on a node that is not unreachable."
  principal = "network"
  match {
    svc    = "observed/instance/{id}/service"
    state  = "observed/instance/{id}/state"
    health = "observed/instance/{id}/health"
    ip     = "observed/instance/{id}/ip"
    node   = "placement/instance/{id}"
    nstate = "observed/node/{node}/state"
  }
  aggregate "port" {
    match {
      exposed = "desired/service/{svc}/expose/{p}"
    }
    min = "int(p)"
  }
  when = "state == 'running' && health == 'healthy' && nstate != 'unreachable' && port.hasValue()"
  derive "endpoint/service/{svc}/{id}" {
    value = "{'ip': ip, 'port': port.value()}"
  }
}
