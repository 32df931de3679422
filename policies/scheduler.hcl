# Scheduler. Every filter a node fails is recorded (`ccattler why-not instance ID`).
# Capacity counts the requests placed on a node, this round's included, not agents' "available".
counts {
  doc      = "Instances of svc pending or running on node."
  params   = ["node", "svc"]
  over     = "placement"
  siblings = "active"
}

counts {
  doc    = "Instances of svc pending or running on node whose agent reports them on the service's image: during a rollout, the new ones."
  params = ["node", "svc"]
  over   = "placement"
  match {
    iimage = "observed/instance/{id}/image"
    dimage = "desired/service/{svc}/image"
  }
  current_siblings = "active && iimage == dimage"
}

counts {
  doc             = "Instances of svc pending or running, wherever placed: a colocated service's first goes anywhere."
  params          = ["svc"]
  over            = "placement"
  placed_siblings = "active"
}

counts {
  doc         = "Instances of svc that failed on node."
  params      = ["node", "svc"]
  over        = "instance"
  match { node = "observed/instance/{id}/node" }
  failed_here = "state == 'failed'"
}

counts {
  doc     = "Instances of any service pending or running on node: a service that requests no cpu or memory goes, among nodes equally allocated, to the one running fewer."
  params  = ["node"]
  over    = "placement"
  on_node = "active"
}

aggregate "used_cpu" {
  doc    = "The cpu requested by the instances pending or running on node."
  params = ["node"]
  over   = "placement"
  match { cpu = "desired/service/{svc}/resources/cpu" }
  where = "active"
  sum   = "cpu"
}

aggregate "used_mem" {
  doc    = "The memory requested by the instances pending or running on node."
  params = ["node"]
  over   = "placement"
  match { mem = "desired/service/{svc}/resources/memory" }
  where = "active"
  sum   = "mem"
}

rule "schedule" {
  doc       = "Every pending instance without a placement is placed on the alive node that fits its requests, spreading a service across zones and nodes, then least allocated."
  principal = "scheduler"
  after     = ["stop_placed_extras"]
  over      = "unplaced"
  match { exists = "desired/service/{svc}" }
  optional {
    cpu  = "desired/service/{svc}/resources/cpu"
    mem  = "desired/service/{svc}/resources/memory"
    arch = "desired/service/{svc}/placement/architecture"
    zone = "desired/service/{svc}/placement/zone"
    pin  = "placement/service/{svc}/node"
    colo = "placement/service/{svc}/colocate"
  }
  when = "state == 'pending'"
  choose "node" {
    match {
      nstate  = "observed/node/{node}/state"
      cap_cpu = "observed/node/{node}/capacity/cpu"
      cap_mem = "observed/node/{node}/capacity/memory"
    }
    optional {
      narch  = "observed/node/{node}/architecture"
      nzone  = "observed/node/{node}/zone"
      nlease = "lease/node/{node}"
      nheld  = "observed/node/{node}/leased"
      nnet   = "observed/node/{node}/network"
    }
    aggregate "port_taken" {
      match {
        node = "placement/instance/{j}"
        jsvc = "observed/instance/{j}/service"
        jst  = "observed/instance/{j}/state"
        jexp = "desired/service/{jsvc}/expose/{p}"
        mine = "desired/service/{svc}/expose/{p}"
      }
      where = "jst == 'pending' || jst == 'running'"
      count = true
    }
    filters {
      alive = "nstate == 'alive'"
      # A lease key put without an etcd lease counts for nothing. The
      # node must also be noted as leased (note_leased): only then do its
      # instances count as placed, and an instance placed where it would
      # not count would be created again (create_instances).
      lease        = "nlease.hasValue() && nheld.orValue(false)"
      architecture = "!arch.hasValue() || narch.orValue('') == arch.value()"
      zone         = "!zone.hasValue() || nzone.orValue('') == zone.value()"
      # Where the service's volume is attached, or before that with its instances (volumes.hcl).
      volume = "pin.hasValue() ? node == pin.value() : (!colo.orValue(false) || placed_siblings == 0 || siblings > 0)"
      cpu    = "used_cpu + cpu.orValue(0.0) <= cap_cpu"
      memory = "used_mem + mem.orValue(0) <= cap_mem"
      port   = "nnet.orValue('') != 'host' || port_taken == 0"
    }
    # Spread first, and while the service has old instances to replace,
    # its instances on its current image among them: a rollout's new
    # instances go beside old ones, not new ones (stop_replaced stops the
    # old one beside them, and the new image ends spread as the old was;
    # outside a rollout the count is not computed). Then nodes where the
    # service failed less (a failed instance is replaced elsewhere when
    # there is a choice); then the least allocated; then, for a service
    # that requests neither cpu nor memory, the node running fewer
    # instances: it allocates nothing, and without this every such
    # service went to the first node by name. Its weight keeps it a
    # tie-break (a million instances count as one allocation), and a
    # service that requests resources does not count them at all.
    score = "-1000.0 * double(siblings) - (old > 0 ? 100.0 * double(current_siblings) : 0.0) - 10.0 * double(math.least(failed_here, 50)) - (cap_cpu > 0.0 ? used_cpu / cap_cpu : 0.0) - (cap_mem > 0 ? double(used_mem) / double(cap_mem) : 0.0) - (cpu.hasValue() || mem.hasValue() ? 0.0 : double(on_node) / 1000000.0)"
  }
  emit "placement/instance/{id}" { value = "node" }
  emit "placement/node/{node}/{id}" { value = "svc" }
}

# placement/node/{node}/{id} indexes the placements by node, with the
# instance's service: an agent watches its own node's prefix, not every
# placement of the cluster (DESIGN §5, watch fan-out), and learns the
# service from what only the engine writes. The scheduler writes an entry
# with its placement and every rule that deletes a placement deletes the
# entry with it; these two repair what else there is (placements made
# before the index, a placement or an entry written or deleted by hand).
# The service an entry names is the one the instance had when it was
# placed: a report rewriting observed/instance/{id}/service later (any node
# may write it) does not change what the node runs.
rule "index_placement" {
  doc       = "A placed instance without its placement/node/{node}/{id} entry gets it, naming its service: its agent runs what its node's entries name. An entry that exists is not rewritten from a report (any node may write observed/instance/)."
  principal = "scheduler"
  # After every rule that deletes a placement: one deleted this round has
  # no entry to repair.
  after = ["schedule", "stop_deleted", "release_failed", "stop_replaced"]
  match {
    node = "placement/instance/{id}"
    svc  = "observed/instance/{id}/service"
  }
  absent = ["placement/node/{node}/{id}"]
  emit "placement/node/{node}/{id}" { value = "svc" }
}

rule "unindex_placement" {
  doc       = "An entry of placement/node/{node}/ whose instance is not placed on that node is deleted: its agent stops the instance."
  principal = "reconcile"
  after     = ["schedule", "stop_deleted", "release_failed", "stop_placed_extras", "stop_replaced", "index_placement"]
  match { svc = "placement/node/{node}/{id}" }
  optional { placed = "placement/instance/{id}" }
  when = "placed.orValue('') != node"
  delete "placement/node/{node}/{id}" {}
}
