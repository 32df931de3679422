# A changed command, args, env or labels is a rolling update like a changed
# image (rollout.hcl, instances.hcl, health.hcl): apply writes
# desired/service/{svc}/spec_digest with them, the agent reports the digest
# its container started with as observed/instance/{id}/spec_digest, and an
# instance whose digest differs is replaced, new first. An instance whose
# agent reports no digest is left as it is.
test "a changed env: one new instance first, the old one stopped once the new one is healthy" {
  seed   = 7
  now    = "2026-11-29T12:00:00Z"
  # c0002's agent does not report the digest: nothing to compare
  worlds = ["api_two_serving"]
  facts  = {
    "desired/service/api/env/GREETING"    = "hello"
    "desired/service/api/spec_digest"     = "00000000000000b2"
    # started before GREETING changed
    "observed/instance/c0001/spec_digest" = "00000000000000b1"
  }
  expect {
    writes = {
      "observed/service/api/rollout" = { image = "api:1", updated = 1, total = 2, state = "progressing", reason = "" }
      "observed/instance/*/service"  = "api"
      "observed/instance/*/state"    = "pending"
      "placement/instance/*"         = "node-1"
      "placement/node/node-1/*" = "api"
    }
    firings = { rollout_status = 1, replace_first = 1, schedule = 1 }
  }
  then "the new one runs the new env but is not healthy yet: nothing stops, no second new one" {
    worlds = [report("103a3", "running", "unknown", "api:1")]
    facts  = {
      "observed/instance/103a3/node"        = "node-1"
      "observed/instance/103a3/spec_digest" = "00000000000000b2"
    }
    expect {
      firings = {}
    }
  }
  then "healthy: the old one stops (not the new extra) and the rollout's view is gone" {
    facts = { "observed/instance/103a3/health" = "healthy" }
    expect {
      deletes = ["placement/instance/c0001", "observed/service/api/rollout", "placement/node/node-1/c0001"]
      firings = { stop_replaced = 1, rollout_status = 1 }
    }
  }
}

test "env removed: an instance started with a digest is replaced, one reported without is not" {
  seed   = 7
  now    = "2026-11-29T12:00:00Z"
  worlds = ["api_two_serving"]
  facts  = {
    "observed/instance/c0001/spec_digest" = "00000000000000b1"
  }
  expect {
    writes = {
      "observed/service/api/rollout" = { image = "api:1", updated = 1, total = 2, state = "progressing", reason = "" }
      "observed/instance/*/service"  = "api"
      "observed/instance/*/state"    = "pending"
      "placement/instance/*"         = "node-1"
      "placement/node/node-1/*" = "api"
    }
    firings = { rollout_status = 1, replace_first = 1, schedule = 1 }
  }
}

test "an old spec's failure does not halt the rollout; the new spec's does" {
  seed   = 7
  now    = "2026-11-29T12:00:00Z"
  worlds = ["api_two_serving", placed("c0009", "api", "failed", "node-1")]
  facts  = {
    "observed/clock"                            = "2026-11-29T12:00:00Z"
    "desired/service/api/spec_digest"           = "00000000000000b2"
    # the restart policy has counted the failure below already
    "observed/service/api/restart/failures"     = 1
    "observed/service/api/restart/last_failure" = "2026-11-29T12:00:00Z"
    "observed/service/api/restart/image"        = "api:1"
    "observed/service/api/restart/reason"       = "exit status 1"
    "observed/service/api/restart/hold"         = "2026-11-29T12:00:01Z"
    "observed/instance/c0001/spec_digest"       = "00000000000000b1"
    "observed/instance/c0002/spec_digest"       = "00000000000000b1"
    # failed with the old env: not the new spec's failure
    "observed/instance/c0009/node"              = "node-1"
    "observed/instance/c0009/image"             = "api:1"
    "observed/instance/c0009/spec_digest"       = "00000000000000b1"
    "observed/instance/c0009/failed_at"         = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      "observed/service/api/rollout" = { image = "api:1", updated = 0, total = 2, state = "progressing", reason = "" }
      "observed/instance/*/service"  = "api"
      "observed/instance/*/state"    = "pending"
      "placement/instance/*"         = "node-1"
      "placement/node/node-1/*" = "api"
    }
    firings = { rollout_status = 1, replace_first = 1, schedule = 1 }
  }
  then "the new env's instance fails: halted, the old ones keep serving" {
    facts = {
      "observed/instance/103a3/node"        = "node-1"
      "observed/instance/103a3/state"       = "failed"
      "observed/instance/103a3/image"       = "api:1"
      "observed/instance/103a3/spec_digest" = "00000000000000b2"
    }
    expect {
      writes = {
        "observed/service/api/rollout"      = { image = "api:1", updated = 0, total = 2, state = "halted", reason = "1 instance(s) of api:1 failed or are unhealthy; 2 running an older image keep serving" }
        "observed/instance/103a3/failed_at" = "2026-11-29T12:00:00Z"
      }
      firings = { rollout_status = 1, note_failed = 1 }
    }
  }
}
