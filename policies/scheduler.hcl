# Scheduler: place every pending instance on one node. Filters (each
# rejection is recorded, so `ccattler why-not instance ID` names them all):
#   alive         the node is alive
#   lease         the node holds lease/node/{node} on a live etcd lease (a
#                 lease key put without one counts for nothing)
#   architecture  the node's architecture, if the service asks for one
#   zone          the node's zone, if the service asks for one
#   volume        the node its single-node volume is attached to, or before
#                 that the node of its instances placed already (volumes.hcl)
#   cpu, memory   the requests of the instances already placed on the node
#                 (those placed earlier in this round included) plus this one
#                 fit in the node's capacity; agents' "available" is not used
#   port          on a node whose instances share its network (the node
#                 reports network = "host", as the containerd agent does), no
#                 pending or running instance placed there exposes a port
#                 this service exposes
# Only instances of services that exist are placed (delete.hcl).
# Score: spread a service's instances across zones and nodes, then prefer
# nodes where the service has failed less (a failed instance is replaced
# elsewhere when there is a choice), then the least allocated node. Ties go to the node id that sorts first; on clusters
# of more than 64 nodes, only a sample of 64 feasible nodes is scored.
rule "schedule" {
  doc       = "Every pending instance without a placement is placed on the alive node that fits its requests, spreading a service across zones and nodes, then least allocated."
  principal = "scheduler"
  after     = ["stop_placed_extras"]
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
    # Nothing is placed for a service that does not exist (delete.hcl).
    exists = "desired/service/{svc}"
  }
  absent = ["placement/instance/{id}"]
  optional {
    cpu  = "desired/service/{svc}/resources/cpu"
    mem  = "desired/service/{svc}/resources/memory"
    arch = "desired/service/{svc}/placement/architecture"
    zone = "desired/service/{svc}/placement/zone"
    pin  = "placement/service/{svc}/node"
    colo = "placement/service/{svc}/colocate"
  }
  # Instances of the service placed already, for a colocated one (volumes.hcl).
  aggregate "placed_siblings" {
    match {
      svc = "observed/instance/{j}/service"
      jst = "observed/instance/{j}/state"
      jn  = "placement/instance/{j}"
    }
    where = "jst == 'pending' || jst == 'running'"
    count = true
  }
  when = "state == 'pending'"
  choose "node" {
    match {
      nstate   = "observed/node/{node}/state"
      cap_cpu  = "observed/node/{node}/capacity/cpu"
      cap_mem  = "observed/node/{node}/capacity/memory"
    }
    optional {
      narch  = "observed/node/{node}/architecture"
      nzone  = "observed/node/{node}/zone"
      nlease = "lease/node/{node}"
      nnet   = "observed/node/{node}/network"
    }
    # Instances placed on the node that expose a port this service exposes.
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
    # Instances of this service that failed on the node.
    aggregate "failed_here" {
      match {
        node = "observed/instance/{j}/node"
        svc  = "observed/instance/{j}/service"
        jst  = "observed/instance/{j}/state"
      }
      where = "jst == 'failed'"
      count = true
    }
    aggregate "used_cpu" {
      match {
        node  = "placement/instance/{j}"
        jsvc  = "observed/instance/{j}/service"
        jcpu  = "desired/service/{jsvc}/resources/cpu"
        jst   = "observed/instance/{j}/state"
      }
      where = "jst == 'pending' || jst == 'running'"
      sum   = "jcpu"
    }
    aggregate "used_mem" {
      match {
        node  = "placement/instance/{j}"
        jsvc  = "observed/instance/{j}/service"
        jmem  = "desired/service/{jsvc}/resources/memory"
        jst   = "observed/instance/{j}/state"
      }
      where = "jst == 'pending' || jst == 'running'"
      sum   = "jmem"
    }
    aggregate "siblings" {
      match {
        node = "placement/instance/{j}"
        svc  = "observed/instance/{j}/service"
        jst  = "observed/instance/{j}/state"
      }
      where = "jst == 'pending' || jst == 'running'"
      count = true
    }
    filters {
      alive        = "nstate == 'alive'"
      lease        = "nlease.hasValue()"
      architecture = "!arch.hasValue() || narch.orValue('') == arch.value()"
      zone         = "!zone.hasValue() || nzone.orValue('') == zone.value()"
      volume       = "pin.hasValue() ? node == pin.value() : (!colo.orValue(false) || placed_siblings == 0 || siblings > 0)"
      cpu          = "used_cpu + cpu.orValue(0.0) <= cap_cpu"
      memory       = "used_mem + mem.orValue(0) <= cap_mem"
      port         = "nnet.orValue('') != 'host' || port_taken == 0"
    }
    # Score at most 64 nodes that pass the filters, from a starting point
    # drawn from the instance: the best of a sample, so that a round placing
    # I instances on N nodes costs I x 64 candidates rather than I x N.
    candidates = 64
    # Fewer siblings first; then nodes where the service failed less; then
    # the lower share of cpu and memory in use.
    score = "-1000.0 * double(siblings) - 10.0 * double(math.least(failed_here, 50)) - (cap_cpu > 0.0 ? used_cpu / cap_cpu : 0.0) - (cap_mem > 0 ? double(used_mem) / double(cap_mem) : 0.0)"
  }
  emit "placement/instance/{id}" { value = "node" }
}
