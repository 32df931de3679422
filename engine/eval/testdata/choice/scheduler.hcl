rule "schedule" {
  doc       = "Place each pending instance without a placement on an alive node with room, spreading the service, then least allocated."
  principal = "scheduler"
  match {
    svc   = "observed/instance/{id}/service"
    state = "observed/instance/{id}/state"
  }
  optional {
    cpu = "desired/service/{svc}/resources/cpu"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  let {
    need = "cpu.orValue(0.0)"
  }
  choose "node" {
    match {
      nstate   = "observed/node/{node}/state"
      capacity = "observed/node/{node}/capacity/cpu"
    }
    # cpu requested by the instances already placed on the candidate,
    # including those placed earlier in this round (read-your-writes)
    aggregate "used" {
      match {
        node = "placement/instance/{other}"
        osvc = "observed/instance/{other}/service"
        ocpu = "desired/service/{osvc}/resources/cpu"
      }
      sum = "ocpu"
    }
    aggregate "mine" {
      match {
        node = "placement/instance/{other}"
        svc  = "observed/instance/{other}/service"
      }
      count = true
    }
    filters {
      alive = "nstate == 'alive'"
      cpu   = "capacity - used >= need"
    }
    score = "-100.0 * double(mine) - used"
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
