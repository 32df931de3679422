rule "publish" {
  doc       = "Endpoints, declared under the wrong principal, with a typo in a template."
  principal = "scheduler"
  match {
    ip = "observed/instance/{id}/ipp"
    s  = "observed/instance/{id}/service"
  }
  derive "endpoint/service/{s}/{id}" {
    value = "{'ip': ip, 'port': 80}"
  }
}
