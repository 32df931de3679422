# The restart policy (restart.hcl): backoff after failures, the reason kept,
# a fresh start after a quiet interval.
test "a crash loop: each failure doubles the wait, the reason is kept, another node is preferred" {
  seed   = 3
  now    = "2026-11-29T12:00:00Z"
  worlds = [service("bad", "nope:1", 1), node("node-1"), node("node-2"),
    capacity("node-1", 4, "8Gi"), capacity("node-2", 4, "8Gi"),
    placed("a0001", "bad", "pending", "node-1")]
  facts = {
    "observed/clock"                = "2026-11-29T12:00:00Z"
    "desired/service/bad/instances" = 1
  }
  expect {
    firings = {}
  }

  then "its start fails: counted, the reason kept, the replacement held a second" {
    facts = {
      "observed/instance/a0001/node"   = "node-1"
      "observed/instance/a0001/state"  = "failed"
      "observed/instance/a0001/health" = "unknown"
      "observed/instance/a0001/reason" = "start: image docker.io/library/nope:1 is not imported and could not be pulled"
    }
    expect {
      writes = {
        "observed/instance/a0001/failed_at"         = "2026-11-29T12:00:00Z"
        "observed/instance/a0001/stopped_at"        = "2026-11-29T12:00:00Z"
        "observed/service/bad/restart/failures"     = 1
        "observed/service/bad/restart/last_failure" = "2026-11-29T12:00:00Z"
        "observed/service/bad/restart/image"        = "nope:1"
        "observed/service/bad/restart/reason"       = "start: image docker.io/library/nope:1 is not imported and could not be pulled"
        "observed/service/bad/restart/hold"         = "2026-11-29T12:00:01Z"
      }
      deletes = ["placement/instance/a0001", "placement/node/node-1/a0001"]
      firings = { note_failed = 1, count_failure = 1, release_failed = 1, note_stopped = 1 }
    }
  }

  then "half a second later: still held" {
    now = "2026-11-29T12:00:00.5Z"
    expect {
      firings = {}
    }
  }

  then "a second later: replaced, on the node it has not failed on" {
    now = "2026-11-29T12:00:01Z"
    expect {
      writes = {
        "observed/instance/*/service" = "bad"
        "observed/instance/*/state"   = "pending"
        "placement/instance/*"        = "node-2"
        "placement/node/node-2/d1fb2" = "bad"
      }
      deletes = ["observed/service/bad/restart/hold"]
      firings = { end_hold = 1, create_instances = 1, schedule = 1 }
    }
  }

  # seed 3 draws d1fb2
  then "the replacement exits with status 1: two seconds now" {
    now = "2026-11-29T12:00:02Z"
    facts = {
      "observed/instance/d1fb2/node"        = "node-2"
      "observed/instance/d1fb2/state"       = "failed"
      "observed/instance/d1fb2/health"      = "unknown"
      "observed/instance/d1fb2/exit_status" = 1
    }
    expect {
      writes = {
        "observed/instance/d1fb2/failed_at"         = "2026-11-29T12:00:02Z"
        "observed/instance/d1fb2/stopped_at"        = "2026-11-29T12:00:00Z"
        "observed/service/bad/restart/failures"     = 2
        "observed/service/bad/restart/last_failure" = "2026-11-29T12:00:02Z"
        "observed/service/bad/restart/reason"       = "exited with status 1"
        "observed/service/bad/restart/hold"         = "2026-11-29T12:00:04Z"
      }
      deletes = ["placement/instance/d1fb2", "placement/node/node-2/d1fb2"]
      firings = { note_failed = 1, count_failure = 1, release_failed = 1, note_stopped = 1 }
    }
  }

  then "one second on: still held (two seconds)" {
    now = "2026-11-29T12:00:03Z"
    expect {
      firings = {}
    }
  }

  then "ten quiet minutes after the last failure: the count starts over" {
    now = "2026-11-29T12:10:02Z"
    expect {
      writes = {
        "observed/instance/*/service" = "bad"
        "observed/instance/*/state"   = "pending"
        "placement/instance/*"        = "node-1"
        "placement/node/node-1/*" = "bad"
      }
      deletes = [
        "observed/service/bad/restart/hold",
        "observed/service/bad/restart/failures",
        "observed/service/bad/restart/reason",
      ]
      firings = { end_hold = 1, forget_failures = 1, create_instances = 1, schedule = 1 }
    }
  }
}

test "restart settings: attempts at the base delay, then doubling up to max_delay" {
  now    = "2026-11-29T12:00:00Z"
  worlds = [instance("a0001", "web", "failed")]
  facts  = {
    "desired/service/web"                       = {}
    "desired/service/web/restart/delay"         = "10s"
    "desired/service/web/restart/max_delay"     = "25s"
    "desired/service/web/restart/attempts"      = 2
    "observed/service/web/restart/failures"     = 1
    "observed/service/web/restart/last_failure" = "2026-11-29T11:59:00Z"
    "observed/service/web/restart/image"        = "unknown"
  }
  expect {
    # the second failure: still within attempts, 10s
    writes = {
      "observed/instance/a0001/failed_at"         = "2026-11-29T12:00:00Z"
      "observed/service/web/restart/failures"     = 2
      "observed/service/web/restart/last_failure" = "2026-11-29T12:00:00Z"
      "observed/service/web/restart/reason"       = "failed; its agent gave no reason"
      "observed/service/web/restart/hold"         = "2026-11-29T12:00:10Z"
    }
    firings = { note_failed = 1, count_failure = 1 }
  }
  then "the third: 20s" {
    now    = "2026-11-29T12:00:30Z"
    worlds = [instance("a0002", "web", "failed")]
    expect {
      writes = {
        "observed/instance/a0002/failed_at"         = "2026-11-29T12:00:30Z"
        "observed/service/web/restart/failures"     = 3
        "observed/service/web/restart/last_failure" = "2026-11-29T12:00:30Z"
        "observed/service/web/restart/hold"         = "2026-11-29T12:00:50Z"
      }
      firings = { note_failed = 1, count_failure = 1 }
    }
  }
  then "the fourth: 40s, capped at max_delay 25s" {
    now    = "2026-11-29T12:01:00Z"
    worlds = [instance("a0003", "web", "failed")]
    expect {
      writes = {
        "observed/instance/a0003/failed_at"         = "2026-11-29T12:01:00Z"
        "observed/service/web/restart/failures"     = 4
        "observed/service/web/restart/last_failure" = "2026-11-29T12:01:00Z"
        "observed/service/web/restart/hold"         = "2026-11-29T12:01:25Z"
      }
      firings = { note_failed = 1, count_failure = 1 }
    }
  }
}

test "failures noted together count once" {
  worlds = [instance("a0001", "web", "failed"), instance("a0002", "web", "failed"),
    instance("a0003", "web", "failed")]
  facts = {
    "desired/service/web" = {}
  }
  expect {
    writes = {
      "observed/instance/a0001/failed_at"         = "2026-11-29T12:00:00Z"
      "observed/instance/a0002/failed_at"         = "2026-11-29T12:00:00Z"
      "observed/instance/a0003/failed_at"         = "2026-11-29T12:00:00Z"
      "observed/service/web/restart/failures"     = 1
      "observed/service/web/restart/last_failure" = "2026-11-29T12:00:00Z"
      "observed/service/web/restart/image"        = "unknown"
      "observed/service/web/restart/reason"       = "failed; its agent gave no reason"
      "observed/service/web/restart/hold"         = "2026-11-29T12:00:01Z"
    }
    firings = { note_failed = 3, count_failure = 1 }
  }
}

test "a fixed image is tried at once: the backoff ends when the image changes" {
  now    = "2026-11-29T12:00:00Z"
  worlds = [service("web", "web:1-typo", 1), node("node-1"), capacity("node-1", 4, "8Gi")]
  facts  = {
    "observed/service/web/restart/failures"     = 6
    "observed/service/web/restart/last_failure" = "2026-11-29T11:59:30Z"
    "observed/service/web/restart/reason"       = "image web:1-typo could not be pulled"
    "observed/service/web/restart/image"        = "web:1-typo"
    "observed/service/web/restart/hold"         = "2026-11-29T12:00:02Z"
  }
  expect {
    firings = {}
  }
  then "the user applies web:1" {
    facts = { "desired/service/web/image" = "web:1" }
    expect {
      writes = {
        "observed/instance/*/service" = "web"
        "observed/instance/*/state"   = "pending"
        "placement/instance/*"        = "node-1"
        "placement/node/node-1/*" = "web"
      }
      deletes = [
        "observed/service/web/restart/hold", "observed/service/web/restart/failures",
        "observed/service/web/restart/reason", "observed/service/web/restart/image",
      ]
      firings = { restart_on_change = 1, create_instances = 1, schedule = 1 }
    }
  }
}
