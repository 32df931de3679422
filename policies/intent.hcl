# Intent resolution: which of the layers' instance counts takes effect.
rule "resolve_intent" {
  doc       = "effective/service/{svc}/instances is the policy intent if any, else the autoscaler's clamped to the service's bounds while it autoscales, else the user's."
  principal = "intent-resolver"
  match { service = "desired/service/{svc}" }
  optional {
    user   = "intent/user/service/{svc}/instances"
    auto   = "intent/autoscaler/service/{svc}/instances"
    pol    = "intent/policy/service/{svc}/instances"
    metric = "desired/service/{svc}/autoscale/metric"
    lo     = "desired/service/{svc}/autoscale/min"
    hi     = "desired/service/{svc}/autoscale/max"
  }
  let {
    autoscaled = "auto.hasValue() && metric.hasValue()"
    clamped    = "auto.hasValue() ? math.greatest(lo.orValue(0), math.least(hi.orValue(auto.value()), auto.value())) : 0"
  }
  when = "pol.hasValue() || autoscaled || user.hasValue()"
  derive "effective/service/{svc}/instances" { value = "pol.hasValue() ? pol.value() : (autoscaled ? clamped : user.value())" }
}
