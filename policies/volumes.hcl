# Volumes: a single-node volume pins its service to the node it is attached to,
# where its data lives, so a replacement finds what its predecessor wrote.
rule "pin_to_volume" {
  doc       = "placement/service/{svc}/node is the node the service's single-node volume is attached to: its instances are placed there."
  principal = "scheduler"
  match {
    vol  = "desired/service/{svc}/volume"
    mode = "desired/volume/{vol}/access_mode"
    node = "observed/volume/{vol}/attached_node"
  }
  when = "mode == 'single-node'"
  derive "placement/service/{svc}/node" { value = "node" }
}

rule "colocate_single_node_volume" {
  doc       = "placement/service/{svc}/colocate is true while the service uses a single-node volume: before the volume is attached, its instances join the first one placed."
  principal = "scheduler"
  match {
    vol  = "desired/service/{svc}/volume"
    mode = "desired/volume/{vol}/access_mode"
  }
  when = "mode == 'single-node'"
  derive "placement/service/{svc}/colocate" { value = "true" }
}
