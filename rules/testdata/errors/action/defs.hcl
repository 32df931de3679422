# A shared action with mistakes where rules take it.
action "create_pending" {
  params = ["count"]
  fresh "id" { count = "count" }
  emit "observed/instance/{id}/service" { value = "svc" }
  emit "observed/instance/{id}/state" { value = "'pending'" }
}

rule "scale" {
  doc       = "Misspells the action it takes."
  principal = "instances"
  match { want = "effective/service/{svc}/instances" }
  do "create_pendng" { count = "want" }
}

rule "scale_by_name" {
  doc       = "Binds no svc for the action's heads to read."
  principal = "instances"
  match { want = "intent/user/service/{name}/instances" }
  do "create_pending" { count = "want" }
}

rule "scale_twice" {
  doc       = "Misspells the param."
  principal = "instances"
  after     = ["scale"]
  match { want = "effective/service/{svc}/instances" }
  do "create_pending" { cout = "want" }
}
