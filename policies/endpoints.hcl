# Endpoints: the network view, what agents report checked against what the engine decided.
rule "publish_endpoint" {
  doc       = "endpoint/service/{svc}/{id} holds the address of the node the instance is placed on (observed/node/{node}/address) and the service's lowest exposed port, for every running, healthy instance whose report names that node, on a node that has held a lease and is not unreachable."
  principal = "network"
  over      = "live"
  match { addr = "observed/node/{node}/address" }
  optional { health = "observed/instance/{id}/health" }
  aggregate "port" {
    match { exposed = "desired/service/{svc}/expose/{p}" }
    min = "int(p)"
  }
  # At the placed node's own address, never the report's: no report redirects traffic.
  when = "serving && reached && inode.hasValue() && port.hasValue()"
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
