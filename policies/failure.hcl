# Failure handling (docs/policies.md). A node whose lease is gone is
# unreachable: its instances stop counting as live, but their facts and
# placements stay (the containers may still run). Mass loss is not node
# failure (compare Kubernetes' unhealthy-zone threshold).
const { max_leaseless_share = 0.55 }

relation "leased_node" {
  doc = "A node that has held a lease, and the lease it holds now."
  match {
    s    = "observed/node/{n}/state"
    held = "observed/node/{n}/leased"
  }
  optional { lease = "lease/node/{n}" }
}
counts {
  doc       = "Nodes that have held a lease; those that hold none now."
  params    = []
  over      = "leased_node"
  nodes     = "true"
  leaseless = "!lease.hasValue()"
}

counts {
  doc            = "The same of the nodes of zone (an optional)."
  params         = ["zone"]
  over           = "leased_node"
  match { nz = "observed/node/{n}/zone" }
  zone_nodes     = "zone.hasValue() && nz == zone.value()"
  zone_leaseless = "zone.hasValue() && nz == zone.value() && !lease.hasValue()"
}

let {
  cluster_ok = "double(leaseless) <= max_leaseless_share * double(nodes)"
  zone_ok    = "zone_nodes == 0 || double(zone_leaseless) <= max_leaseless_share * double(zone_nodes)"
}

rule "note_leased" {
  doc       = "A node that holds lease/node/{node} on a live etcd lease gets observed/node/{node}/leased: from then on it counts in the failure policy's shares and its instances count as live; a node that never held a lease counts for nothing."
  principal = "failure"
  match {
    state = "observed/node/{node}/state"
    lease = "lease/node/{node}"
  }
  absent = ["observed/node/{node}/leased"]
  emit "observed/node/{node}/leased" { value = "true" }
}

rule "note_lost_lease" {
  doc       = "An alive node that held a lease (observed/node/{node}/leased) and has none now gets observed/node/{node}/lost_at: the clock when it was first seen without one outside a mass loss (more than 55% of the leased nodes, of all or of its zone, without a lease)."
  principal = "failure"
  match {
    state = "observed/node/{node}/state"
    held  = "observed/node/{node}/leased"
    clock = "observed/clock"
  }
  absent = ["lease/node/{node}", "observed/node/{node}/lost_at"]
  optional { zone = "observed/node/{node}/zone" }
  when = "state == 'alive' && cluster_ok && zone_ok"
  emit "observed/node/{node}/lost_at" { value = "clock" }
}

rule "restart_grace_in_disruption" {
  doc       = "During a mass loss (more than 55% of all nodes or of the node's zone without a lease) a leaseless node's lost_at is dropped, so its grace starts again when the disruption ends: the leases that return last are not marked the moment the others are back."
  principal = "failure"
  after     = ["note_lost_lease"]
  match { lost = "observed/node/{node}/lost_at" }
  absent = ["lease/node/{node}"]
  optional { zone = "observed/node/{node}/zone" }
  when = "!(cluster_ok && zone_ok)"
  delete "observed/node/{node}/lost_at" {}
}

rule "forget_lost_lease" {
  doc       = "A node that holds its lease again is no longer marked as having lost it."
  principal = "failure"
  after     = ["note_lost_lease", "restart_grace_in_disruption"]
  match {
    lost  = "observed/node/{node}/lost_at"
    lease = "lease/node/{node}"
  }
  delete "observed/node/{node}/lost_at" {}
}

rule "node_unreachable" {
  doc       = "An alive node whose lease has been gone for 12 seconds becomes unreachable. During a mass loss no node has a lost_at (restart_grace_in_disruption), so none is marked."
  principal = "failure"
  after     = ["restart_grace_in_disruption"]
  match {
    state = "observed/node/{node}/state"
    lost  = "observed/node/{node}/lost_at"
    clock = "observed/clock"
  }
  absent = ["lease/node/{node}"]
  # 12s outlasts the spread of a mass loss: a third of the lease TTL (30s) plus etcd's expiry sweep.
  when = "state == 'alive' && clock - lost >= duration('12s')"
  emit "observed/node/{node}/state" { value = "'unreachable'" }
}

rule "node_returns" {
  doc       = "An unreachable node whose agent holds its lease again is alive."
  principal = "failure"
  after     = ["node_unreachable"]
  match {
    state = "observed/node/{node}/state"
    lease = "lease/node/{node}"
  }
  when = "state == 'unreachable'"
  emit "observed/node/{node}/state" { value = "'alive'" }
}

rule "detect_disruption" {
  doc       = "While more than 55% of all nodes are without a lease, observed/disruption/cluster counts them: the control plane assumes it is cut off itself, and this is why no node is marked unreachable."
  principal = "failure"
  match { state = "observed/node/{node}/state" }
  when = "!cluster_ok"
  derive "observed/disruption/cluster" { value = "{'leaseless': leaseless, 'nodes': nodes}" }
}

rule "detect_zone_disruption" {
  doc       = "While more than 55% of a zone's nodes are without a lease, observed/disruption/zone/{z} counts them: no node of the zone is marked unreachable."
  principal = "failure"
  match { z = "observed/node/{node}/zone" }
  # The same fact as an optional: what the zone counts are grouped by.
  optional { zone = "observed/node/{node}/zone" }
  when = "!zone_ok"
  derive "observed/disruption/zone/{z}" { value = "{'leaseless': zone_leaseless, 'nodes': zone_nodes}" }
}
