test "a node without a lease becomes unreachable, once" {
  facts = {
    "observed/node/node-1/state" = "alive"
    "lease/node/node-1"          = {}
    "observed/node/node-2/state" = "alive"
  }
  expect {
    writes  = { "observed/node/node-2/state" = "unreachable" }
    firings = { mark_unreachable = 1 }
  }
  then "node-1's lease expires" {
    delete = ["lease/node/node-1"]
    expect {
      writes  = { "observed/node/node-1/state" = "unreachable" }
      firings = { mark_unreachable = 1 }
    }
  }
  then "the lease returns: nothing to do" {
    facts = { "lease/node/node-1" = {} }
    expect {
      firings = {}
    }
  }
}

test "absence with an unbound variable means none at all" {
  facts = {
    "desired/service/web"        = {}
    "endpoint/service/web/a8f31" = { ip = "10.1.0.5", port = 8080 }
    "desired/service/db"         = {}
  }
  expect {
    writes  = { "intent/policy/service/db/instances" = 1 }
    firings = { flag_lonely_service = 1 }
  }
  then "web's last endpoint goes" {
    delete = ["endpoint/service/web/a8f31"]
    expect {
      writes = { "intent/policy/service/web/instances" = 1 }
    }
  }
}
