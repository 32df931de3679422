# Volumes. A service names the volume its instances mount (volume = NAME in
# its file); agents provide it on their node and report where it is attached.
# A single-node volume pins the service: every instance of it is placed on
# the node the volume is attached to (the scheduler's volume filter), so a
# replacement finds what its predecessor wrote. The pin stays while the
# volume is detached: its data lives on that node. Before the volume is
# attached anywhere, the service is colocated: its first instance goes where
# the scheduler likes, the others join it.
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
