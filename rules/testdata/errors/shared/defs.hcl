# Shared definitions with mistakes at their uses.
relation "instance" {
  match {
    svc   = "observed/instance/{i}/service"
    state = "observed/instance/{i}/state"
  }
}

counts {
  params  = ["svc"]
  over    = "instance"
  running = "state == 'running'"
}

let {
  missing = "want - running"
}

rule "scale" {
  doc       = "Misspells a shared count."
  principal = "instances"
  match {
    want = "effective/service/{svc}/instances"
  }
  when = "runing < want"
  emit "observed/service/{svc}/restart/failures" {
    value = "want"
  }
}

rule "scale_by_name" {
  doc       = "Reads a count grouped by svc without binding svc, and a let that reads want."
  principal = "instances"
  match {
    n = "intent/user/service/{name}/instances"
  }
  when = "running > 0 || missing > 0"
  emit "observed/service/{name}/restart/reason" {
    value = "'none'"
  }
}
