# Autoscaling (autoscale.hcl): ceil(current × average / threshold), a 10 %
# tolerance, min..max, and a scale-down stabilization window.

# The first three, four or six instances of a service report a cpu load.
world "cpu_of_3" {
  params = ["service", "load"]
  facts = {
    "observed/service/${service}/metrics/cpu/e0001" = load
    "observed/service/${service}/metrics/cpu/e0002" = load
    "observed/service/${service}/metrics/cpu/e0003" = load
  }
}

world "cpu_of_4" {
  params = ["service", "load"]
  worlds = [cpu_of_3(service, load)]
  facts  = { "observed/service/${service}/metrics/cpu/e0004" = load }
}

world "cpu_of_6" {
  params = ["service", "load"]
  worlds = [cpu_of_4(service, load)]
  facts  = {
    "observed/service/${service}/metrics/cpu/e0005" = load
    "observed/service/${service}/metrics/cpu/e0006" = load
  }
}
test "load above the threshold scales up at once, down only after the window" {
  now    = "2026-11-29T12:00:00Z"
  worlds = [cpu_of_3("web", 0.9)]
  facts  = {
    "desired/service/web/autoscale/metric"        = "cpu"
    "desired/service/web/autoscale/threshold"     = 0.5
    "desired/service/web/autoscale/min"           = 2
    "desired/service/web/autoscale/max"           = 8
    "desired/service/web/autoscale/stabilization" = "60s"
    "observed/clock"                              = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      # 3 × 0.9 / 0.5 = 5.4
      "observed/service/web/autoscale/recommendation" = 6
      "observed/service/web/autoscale/seen/6"         = "2026-11-29T12:00:00Z"
      "intent/autoscaler/service/web/instances"       = 6
    }
    firings = { autoscale_recommend = 1, autoscale_remember = 1, autoscale_intent = 1 }
  }

  then "six instances at the threshold: nothing changes" {
    worlds = [cpu_of_6("web", 0.5)]
    expect {
      firings = {}
    }
  }

  then "the load drops: 2 is recommended, 6 is kept within the window" {
    worlds = [cpu_of_6("web", 0.1)]
    facts  = {
      "observed/clock" = "2026-11-29T12:00:05Z"
    }
    expect {
      writes = {
        "observed/service/web/autoscale/recommendation" = 2
        "observed/service/web/autoscale/seen/2"         = "2026-11-29T12:00:05Z"
      }
      firings = { autoscale_recommend = 1, autoscale_remember = 1 }
    }
  }

  then "30 seconds later: the recommendation is refreshed, the intent still 6" {
    facts = { "observed/clock" = "2026-11-29T12:00:35Z" }
    expect {
      writes  = { "observed/service/web/autoscale/seen/2" = "2026-11-29T12:00:35Z" }
      firings = { autoscale_remember = 1 }
    }
  }

  then "the window has passed since 6 was last recommended: down to 2" {
    facts = { "observed/clock" = "2026-11-29T12:01:01Z" }
    expect {
      writes = {
        "observed/service/web/autoscale/seen/2"   = "2026-11-29T12:01:01Z"
        "intent/autoscaler/service/web/instances" = 2
      }
      deletes = ["observed/service/web/autoscale/seen/6"]
      firings = { autoscale_remember = 1, autoscale_forget = 1, autoscale_intent = 1 }
    }
  }
}

test "within 10 % of the threshold the count is kept; min and max bound it" {
  now    = "2026-11-29T12:00:00Z"
  worlds = [cpu_of_4("api", 0.54)]
  facts  = {
    "desired/service/api/autoscale/metric"    = "cpu"
    "desired/service/api/autoscale/threshold" = 0.5
    "desired/service/api/autoscale/max"       = 8
    "observed/clock"                          = "2026-11-29T12:00:00Z"
  }
  expect {
    writes = {
      # ratio 1.08: within the tolerance, 4 stays 4 (not ceil(4.32) = 5)
      "observed/service/api/autoscale/recommendation" = 4
      "observed/service/api/autoscale/seen/4"         = "2026-11-29T12:00:00Z"
      "intent/autoscaler/service/api/instances"       = 4
    }
    firings = { autoscale_recommend = 1, autoscale_remember = 1, autoscale_intent = 1 }
  }
  then "four times the threshold: 16, bounded by max 8" {
    worlds = [cpu_of_4("api", 2.0)]
    expect {
      writes = {
        "observed/service/api/autoscale/recommendation" = 8
        "observed/service/api/autoscale/seen/8"         = "2026-11-29T12:00:00Z"
        "intent/autoscaler/service/api/instances"       = 8
      }
      firings = { autoscale_recommend = 1, autoscale_remember = 1, autoscale_intent = 1 }
    }
  }
  then "almost no load: 1 instance, the default min" {
    worlds = [cpu_of_4("api", 0.01)]
    facts  = {
      "observed/clock" = "2026-11-29T12:10:00Z"
    }
    expect {
      writes = {
        "observed/service/api/autoscale/recommendation" = 1
        "observed/service/api/autoscale/seen/1"         = "2026-11-29T12:10:00Z"
        "intent/autoscaler/service/api/instances"       = 1
      }
      deletes = ["observed/service/api/autoscale/seen/4", "observed/service/api/autoscale/seen/8"]
      firings = { autoscale_recommend = 1, autoscale_remember = 1, autoscale_forget = 2, autoscale_intent = 1 }
    }
  }
}

test "no instance reports the metric: no recommendation, and no error" {
  now   = "2026-11-29T12:00:00Z"
  facts = {
    "desired/service/api/autoscale/metric"    = "cpu"
    "desired/service/api/autoscale/threshold" = 0.5
    "observed/clock"                          = "2026-11-29T12:00:00Z"
  }
  expect {
    firings  = {}
    problems = []
  }
  then "a huge metric is bounded by max, not an overflow" {
    facts = {
      "desired/service/api/autoscale/max"      = 4
      "observed/service/api/metrics/cpu/e0001" = 1e300
    }
    expect {
      writes = {
        "observed/service/api/autoscale/recommendation" = 4
        "observed/service/api/autoscale/seen/4"         = "2026-11-29T12:00:00Z"
        "intent/autoscaler/service/api/instances"       = 4
      }
      firings = { autoscale_recommend = 1, autoscale_remember = 1, autoscale_intent = 1 }
    }
  }
}
