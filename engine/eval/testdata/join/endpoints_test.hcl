test "an endpoint per running, healthy instance and exposed port" {
  facts = {
    "desired/service/web"              = {}
    "desired/service/web/expose/8080"  = {}
    "observed/instance/a8f31/service"  = "web"
    "observed/instance/a8f31/state"    = "running"
    "observed/instance/a8f31/ip"       = "10.1.0.5"
    "observed/instance/a8f31/health"   = "healthy"
    "observed/instance/b72c9/service"  = "web"
    "observed/instance/b72c9/state"    = "running"
    "observed/instance/b72c9/ip"       = "10.1.0.9"
    "observed/instance/b72c9/health"   = "healthy"
    # no health reported yet: the optional pattern is empty, no endpoint
    "observed/instance/c913d/service"  = "web"
    "observed/instance/c913d/state"    = "running"
    "observed/instance/c913d/ip"       = "10.1.0.12"
    # another service's instance joins nothing: no expose
    "observed/instance/d41ab/service"  = "db"
    "observed/instance/d41ab/state"    = "running"
    "observed/instance/d41ab/ip"       = "10.1.0.17"
    "observed/instance/d41ab/health"   = "healthy"
  }
  expect {
    writes = {
      "endpoint/service/web/a8f31" = { ip = "10.1.0.5", port = 8080 }
      "endpoint/service/web/b72c9" = { ip = "10.1.0.9", port = 8080 }
    }
    firings = { publish_endpoint = 2 }
  }
  then "the third reports healthy" {
    facts = { "observed/instance/c913d/health" = "healthy" }
    expect {
      writes  = { "endpoint/service/web/c913d" = { ip = "10.1.0.12", port = 8080 } }
      firings = { publish_endpoint = 1 }
    }
  }
  then "one stops: its endpoint is deleted" {
    facts = { "observed/instance/b72c9/state" = "stopped" }
    expect {
      deletes = ["endpoint/service/web/b72c9"]
      firings = { publish_endpoint = 1 }
    }
  }
  then "its ip changes: the endpoint follows" {
    facts = { "observed/instance/a8f31/ip" = "10.1.0.6" }
    expect {
      writes = { "endpoint/service/web/a8f31" = { ip = "10.1.0.6", port = 8080 } }
    }
  }
  then "someone deletes a derived key: the view repairs it" {
    delete = ["endpoint/service/web/c913d"]
    expect {
      writes = { "endpoint/service/web/c913d" = { ip = "10.1.0.12", port = 8080 } }
    }
  }
  then "the port is no longer exposed: every endpoint goes" {
    delete = ["desired/service/web/expose/8080"]
    expect {
      deletes = ["endpoint/service/web/a8f31", "endpoint/service/web/c913d"]
    }
  }
}
