test "the user's 3 become effective, then 3 pending instances" {
  facts = {
    "desired/service/web"                 = {}
    "intent/user/service/web/instances"   = 3
  }
  expect {
    writes = {
      "effective/service/web/instances" = 3
      "observed/instance/*/service"     = "web"
      "observed/instance/*/state"       = "pending"
    }
    # one binding creates all three: three firings, one per id
    firings = { resolve_intent = 1, create_instances = 3 }
  }
  then "the autoscaler asks for 5: two more" {
    facts = { "intent/autoscaler/service/web/instances" = 5 }
    expect {
      writes = {
        "effective/service/web/instances" = 5
        "observed/instance/*/service"     = "web"
        "observed/instance/*/state"       = "pending"
      }
      firings = { resolve_intent = 1, create_instances = 2 }
    }
  }
  then "a policy intent of 2 overrides: nothing is created (stopping extras is another rule)" {
    facts = { "intent/policy/service/web/instances" = 2 }
    expect {
      writes  = { "effective/service/web/instances" = 2 }
      firings = { resolve_intent = 1 }
    }
  }
}

test "failed instances do not count as live" {
  facts = {
    "intent/user/service/api/instances" = 2
    "observed/instance/a0001/service" = "api"
    "observed/instance/a0001/state"   = "failed"
    "observed/instance/a0002/service" = "api"
    "observed/instance/a0002/state"   = "running"
  }
  expect {
    writes = {
      "effective/service/api/instances" = 2
      "observed/instance/*/service" = "api"
      "observed/instance/*/state"   = "pending"
    }
    firings = { resolve_intent = 1, create_instances = 1 }
  }
}

test "a thousand missing instances in one round" {
  facts = { "intent/user/service/big/instances" = 1000 }
  expect {
    writes = {
      "effective/service/big/instances" = 1000
      "observed/instance/*/service" = "big"
      "observed/instance/*/state"   = "pending"
    }
    firings = { resolve_intent = 1, create_instances = 1000 }
  }
}
