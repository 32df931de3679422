# Endpoints: the network view of the services, derived from what agents report
# and checked against what the engine decided: an instance is reached at the
# address of the node it is placed on (host networking).
# The key schema has one endpoint per instance, so an instance of a service
# that exposes several ports is published on the lowest of them.
rule "publish_endpoint" {
  doc       = "endpoint/service/{svc}/{id} holds the address of the node the instance is placed on (observed/node/{node}/address) and the service's lowest exposed port, for every running, healthy instance whose report names that node, on a node that has held a lease and is not unreachable."
  principal = "network"
  match {
    svc    = "observed/instance/{id}/service"
    state  = "observed/instance/{id}/state"
    health = "observed/instance/{id}/health"
    inode  = "observed/instance/{id}/node"
    node   = "placement/instance/{id}"
    nstate = "observed/node/{node}/state"
    held   = "observed/node/{node}/leased"
    addr   = "observed/node/{node}/address"
  }
  aggregate "port" {
    match { exposed = "desired/service/{svc}/expose/{p}" }
    min = "int(p)"
  }
  # A report is believed only from the node of the placement (disown_report
  # records the others), and the address is that node's own: no report can
  # redirect a service's traffic.
  when = "state == 'running' && health == 'healthy' && inode == node && nstate != 'unreachable' && port.hasValue()"
  derive "endpoint/service/{svc}/{id}" { value = "{'ip': addr, 'port': port.value()}" }
}

rule "disown_report" {
  doc       = "While an instance's report names another node than its placement, observed/instance/{id}/disowned holds the node it names: the report is not believed (no endpoint, not counted), and this records it."
  principal = "failure"
  match {
    inode = "observed/instance/{id}/node"
    node  = "placement/instance/{id}"
  }
  when = "inode != node"
  derive "observed/instance/{id}/disowned" { value = "inode" }
}
