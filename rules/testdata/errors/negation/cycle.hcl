rule "a" {
  doc       = "Autoscale to the user's count unless a policy intent exists."
  principal = "admin"
  match {
    n = "intent/user/service/{name}/instances"
  }
  absent = ["intent/policy/service/{name}/instances"]
  emit "intent/autoscaler/service/{name}/instances" {
    value = "n"
  }
}

rule "b" {
  doc       = "A policy intent follows the autoscaler's (a view)."
  principal = "admin"
  match {
    n = "intent/autoscaler/service/{name}/instances"
  }
  derive "intent/policy/service/{name}/instances" {
    value = "n"
  }
}
