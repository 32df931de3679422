test "a stopped instance's facts are kept an hour, then collected" {
  worlds = [instance("a0001", "web", "stopped"), placed("a0002", "web", "failed", "node-1")]
  facts  = {
    "observed/clock"                     = "2026-11-29T12:00:00Z"
    "desired/service/web"                = {}
    "observed/instance/a0001/node"       = "node-1"
    "observed/instance/a0001/health"     = "unknown"
    "observed/instance/a0001/started_at" = "2026-11-29T10:00:00Z"
  }
  expect {
    # a0002 failed but is still placed: not history yet
    writes = {
      "observed/instance/a0001/stopped_at" = "2026-11-29T12:00:00Z"
      "observed/instance/a0002/failed_at"  = "2026-11-29T12:00:00Z"
      # the restart policy counts the failure (restart.hcl)
      "observed/service/web/restart/failures"     = 1
      "observed/service/web/restart/last_failure" = "2026-11-29T12:00:00Z"
      "observed/service/web/restart/image"        = "unknown"
      "observed/service/web/restart/reason"       = "failed; its agent gave no reason"
      "observed/service/web/restart/hold"         = "2026-11-29T12:00:01Z"
    }
    firings = { note_stopped = 1, note_failed = 1, count_failure = 1 }
  }
  then "59 minutes later: kept" {
    facts = { "observed/clock" = "2026-11-29T12:59:00Z" }
    expect {
      firings = {}
    }
  }
  then "past the hour: every fact of a0001 deleted" {
    facts = { "observed/clock" = "2026-11-29T13:00:01Z" }
    expect {
      deletes = [
        "observed/instance/a0001/service", "observed/instance/a0001/state", "observed/instance/a0001/node",
        "observed/instance/a0001/health", "observed/instance/a0001/started_at", "observed/instance/a0001/stopped_at",
      ]
      firings = { collect_stopped = 1 }
    }
  }
}

test "a crash loop keeps only the five newest failed instances of its service" {
  worlds = [instance("f0001", "bad", "failed"), instance("f0002", "bad", "failed"),
    instance("f0003", "bad", "failed"), instance("f0004", "bad", "failed"),
    instance("f0005", "bad", "failed"), instance("f0006", "bad", "failed")]
  facts = {
    "observed/clock"                            = "2026-11-29T12:00:00Z"
    "desired/service/bad"                       = {}
    "observed/instance/f0001/failed_at"         = "2026-11-29T11:59:01Z"
    "observed/instance/f0001/reason"            = "start: port 8080 is not free on this node"
    "observed/instance/f0001/stopped_at"        = "2026-11-29T11:59:01Z"
    "observed/instance/f0002/failed_at"         = "2026-11-29T11:59:02Z"
    "observed/instance/f0002/stopped_at"        = "2026-11-29T11:59:02Z"
    "observed/instance/f0003/failed_at"         = "2026-11-29T11:59:03Z"
    "observed/instance/f0003/stopped_at"        = "2026-11-29T11:59:03Z"
    "observed/instance/f0004/failed_at"         = "2026-11-29T11:59:04Z"
    "observed/instance/f0004/stopped_at"        = "2026-11-29T11:59:04Z"
    "observed/instance/f0005/failed_at"         = "2026-11-29T11:59:05Z"
    "observed/instance/f0005/stopped_at"        = "2026-11-29T11:59:05Z"
    "observed/instance/f0006/failed_at"         = "2026-11-29T11:59:06Z"
    "observed/instance/f0006/stopped_at"        = "2026-11-29T11:59:06Z"
    "observed/service/bad/restart/last_failure" = "2026-11-29T11:59:06Z"
  }
  expect {
    # f0001 has five newer failures: collected within the hour
    deletes = [
      "observed/instance/f0001/service", "observed/instance/f0001/state", "observed/instance/f0001/failed_at",
      "observed/instance/f0001/reason", "observed/instance/f0001/stopped_at",
    ]
    firings = { collect_stopped = 1 }
  }
}

test "a collected instance leaves no fact behind: what its agent reported of its spec goes too" {
  worlds = [instance("a0001", "web", "stopped")]
  facts  = {
    "observed/clock"                           = "2026-11-29T13:00:01Z"
    "desired/service/web"                      = {}
    "observed/instance/a0001/stopped_at"       = "2026-11-29T12:00:00Z"
    "observed/instance/a0001/resources/cpu"    = 0.5
    "observed/instance/a0001/resources/memory" = "256Mi"
    "observed/instance/a0001/spec_digest"      = "3f9a0c5e7b2d4a61"
  }
  expect {
    deletes = [
      "observed/instance/a0001/service", "observed/instance/a0001/state", "observed/instance/a0001/stopped_at",
      "observed/instance/a0001/resources/cpu", "observed/instance/a0001/resources/memory", "observed/instance/a0001/spec_digest",
    ]
    firings = { collect_stopped = 1 }
  }
}
