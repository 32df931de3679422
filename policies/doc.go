// Package policies holds CCattler's default controllers as HCL rule files,
// embedded in the binary: intent resolution, instance creation and
// stopping, scheduling, endpoints, failure handling, health replacement,
// rolling updates, autoscaling, volume placement and garbage collection. It has no Go logic;
// an operator replaces the set with `ccattler server --policies DIR`, and
// `ccattler rules check|test DIR` checks and tests a copy before it runs.
//
//	intent.hcl     intent/{user,autoscaler,policy} -> effective/service/{svc}/instances
//	instances.hcl  effective -> pending instances with fresh ids; stopping extras
//	scheduler.hcl  pending instances -> placement/instance/{id}
//	endpoints.hcl  running, healthy instances -> endpoint/service/{svc}/{id}
//	failure.hcl    lost leases -> observed/node/{node}/state, with a mass-loss guard
//	health.hcl     unhealthy for health/failures checks -> retiring; failed -> released
//	rollout.hcl    older image or retiring -> new instance first, then the old stopped,
//	               within update/max_extra and max_unavailable; halts on a bad image
//	autoscale.hcl  per-instance metrics -> intent/autoscaler/..., HPA-style with a
//	               scale-down stabilization window
//	volumes.hcl    a single-node volume's attached node -> placement/service/{svc}/node
//	gc.hcl         instances stopped without a placement for an hour -> their facts deleted
package policies
