# Autoscaling as the Kubernetes HPA does it (docs/policies.md), from what users,
# agents and the clock write and its own facts only: were it to read the instances
# the other rules create, they would depend on the intent resolver's view through a negation.
let { stabilization = "window.orValue(duration('300s'))" }

relation "metric_report" {
  match { value = "observed/service/{svc}/metrics/{metric}/{i}" }
}

rule "autoscale_recommend" {
  doc       = "observed/service/{svc}/autoscale/recommendation: ceil(current × average / threshold) over the instances reporting the service's autoscale/metric, the current count within 10 % of the threshold, clamped to autoscale/min..max."
  principal = "autoscaler"
  match {
    metric    = "desired/service/{svc}/autoscale/metric"
    threshold = "desired/service/{svc}/autoscale/threshold"
  }
  optional {
    lo = "desired/service/{svc}/autoscale/min"
    hi = "desired/service/{svc}/autoscale/max"
  }
  aggregate "total" {
    over = "metric_report"
    sum  = "value"
  }
  aggregate "current" {
    over  = "metric_report"
    count = true
  }
  let {
    # Guarded here, not only in when: lets are evaluated first. A million
    # instances is beyond any max and keeps int() from overflowing.
    ratio = "current > 0 && threshold > 0.0 ? total / double(current) / threshold : 1.0"
    raw   = "math.abs(ratio - 1.0) <= 0.1 ? current : int(math.ceil(math.least(double(current) * ratio, 1000000.0)))"
    floor = "lo.orValue(1)"
  }
  when = "current > 0 && threshold > 0.0"
  derive "observed/service/{svc}/autoscale/recommendation" { value = "math.greatest(floor, math.least(hi.orValue(math.greatest(raw, floor)), raw))" }
}

rule "autoscale_remember" {
  doc       = "observed/service/{svc}/autoscale/seen/{count} holds when the autoscaler last recommended count instances, refreshed every 10 s (half the stabilization window if shorter) while it does."
  principal = "autoscaler"
  match {
    rec   = "observed/service/{svc}/autoscale/recommendation"
    clock = "observed/clock"
  }
  optional { window = "desired/service/{svc}/autoscale/stabilization" }
  aggregate "last" {
    match { at = "observed/service/{svc}/autoscale/seen/{n}" }
    where = "int(n) == rec"
    max   = "int(at)"
  }
  let { count = "string(rec)" }
  when = "!last.hasValue() || (int(clock) - last.value()) * 1000 >= math.least(10000, stabilization.getMilliseconds() / 2)"
  emit "observed/service/{svc}/autoscale/seen/{count}" { value = "clock" }
}

rule "autoscale_intent" {
  doc       = "intent/autoscaler/service/{svc}/instances is the highest count recommended within the service's stabilization window (default 300 s): up at once, down only after the window."
  principal = "autoscaler"
  match {
    metric = "desired/service/{svc}/autoscale/metric"
    clock  = "observed/clock"
  }
  optional {
    window = "desired/service/{svc}/autoscale/stabilization"
    cur    = "intent/autoscaler/service/{svc}/instances"
  }
  aggregate "peak" {
    match { at = "observed/service/{svc}/autoscale/seen/{n}" }
    where = "clock - at <= stabilization"
    max   = "int(n)"
  }
  when = "peak.hasValue() && cur.orValue(-1) != peak.value()"
  emit "intent/autoscaler/service/{svc}/instances" { value = "peak.value()" }
}

rule "autoscale_forget" {
  doc       = "A recommendation older than the service's stabilization window is forgotten."
  principal = "autoscaler"
  after     = ["autoscale_remember"]
  match {
    at    = "observed/service/{svc}/autoscale/seen/{n}"
    clock = "observed/clock"
  }
  optional { window = "desired/service/{svc}/autoscale/stabilization" }
  when = "clock - at > stabilization"
  delete "observed/service/{svc}/autoscale/seen/{n}" {}
}
