# A choice's pick, order and an aggregate's guard, each written wrongly.
rule "stop_extras" {
  doc       = "Stop extras."
  principal = "reconcile"
  match {
    want = "effective/service/{svc}/instances"
  }
  aggregate "placed" {
    match {
      svc  = "observed/instance/{i}/service"
      node = "placement/instance/{i}"
    }
    count = true
    guard = "yes"
  }
  when = "placed > want"
  choose "victim" {
    match {
      svc    = "observed/instance/{v}/service"
      vnode  = "placement/instance/{v}"
      vstate = "observed/instance/{v}/state"
    }
    optional {
      vstarted = "observed/instance/{v}/started_at"
    }
    pick  = "'all of them'"
    order = [desc("vstate == 'pending'"), first("vstarted.orValue(now)"), "{'a': 1}", asc()]
    score = "0"
  }
  delete "placement/instance/{v}" {}
}

rule "extras_view" {
  doc       = "A view may not guard."
  principal = "autoscaler"
  match {
    want = "effective/service/{svc}/instances"
  }
  aggregate "placed" {
    match {
      svc  = "observed/instance/{i}/service"
      node = "placement/instance/{i}"
    }
    count = true
    guard = true
  }
  derive "observed/service/{svc}/autoscale/recommendation" {
    value = "placed"
  }
}
