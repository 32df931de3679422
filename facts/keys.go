package facts

import (
	"strconv"
	"strings"
)

// The built-in key forms of the key schema (seed/etcd-key-schema.txt), each
// with the type of its values. Names are the template's literals joined by
// dots; they are the segments under schema/.

func f(v float64) *float64 { return &v }

var (
	vObject  = ValueType{Kind: KindObject}
	vName    = ValueType{Kind: KindString, Format: "name"}
	vString  = ValueType{Kind: KindString}
	vCount   = ValueType{Kind: KindInt, Min: f(0)}
	vInstN   = ValueType{Kind: KindInt, Min: f(0), Max: f(MaxInstances), MaxName: "MaxInstances", Unit: "instances"}
	vCPU     = ValueType{Kind: KindCPU, Min: f(0)}
	vMemory  = ValueType{Kind: KindMemory}
	vInstSt  = ValueType{Kind: KindEnum, Enum: []string{"pending", "running", "failed", "stopped"}}
	vNodeSt  = ValueType{Kind: KindEnum, Enum: []string{"alive", "unreachable", "draining"}}
	vVolSt   = ValueType{Kind: KindEnum, Enum: []string{"attached", "detached", "error"}}
	vHealth  = ValueType{Kind: KindEnum, Enum: []string{"healthy", "unhealthy", "unknown"}}
	vMethod  = ValueType{Kind: KindEnum, Enum: []string{"GET", "HEAD", "TCP"}}
	vAccess  = ValueType{Kind: KindEnum, Enum: []string{"single-node", "multi-node"}}
	vEndpnt  = ValueType{Kind: KindObject, Fields: map[string]ValueKind{"ip": KindIP, "port": KindInt}}
	vDisrupt = ValueType{Kind: KindObject, Fields: map[string]ValueKind{"leaseless": KindInt, "nodes": KindInt}}
	vRollout = ValueType{Kind: KindObject, Fields: map[string]ValueKind{"image": KindString, "updated": KindInt, "total": KindInt, "state": KindString}}
	vSummary = ValueType{Kind: KindObject, Fields: map[string]ValueKind{"running": KindInt, "healthy": KindInt, "updated": KindInt}}
	vRetire  = ValueType{Kind: KindEnum, Enum: []string{"unhealthy"}}
	vChecks  = ValueType{Kind: KindInt, Min: f(1)}
	vMetric  = ValueType{Kind: KindNumber, Min: f(0)}
	vSchema  = ValueType{Kind: KindObject, Fields: map[string]ValueKind{"key": KindString, "type": KindString}}
	vImage   = ValueType{Kind: KindString, Format: "image"}
	vPath    = ValueType{Kind: KindString, Format: "path"}
	vThresh  = ValueType{Kind: KindNumber, Min: f(0)}
	vBool    = ValueType{Kind: KindBool}
	vDur     = ValueType{Kind: KindDuration}
	vTime    = ValueType{Kind: KindTime}
	vIP      = ValueType{Kind: KindIP}
	vAnyJSON = ValueType{Kind: KindJSON}
	vStrings = ValueType{Kind: KindJSON, Format: "strings"}
	vReason  = ValueType{Kind: KindString, Format: "reason"}
	vNetwork = ValueType{Kind: KindEnum, Enum: []string{"host"}}
	vAddr    = ValueType{Kind: KindString, Format: "hostport"}
	vDigest  = ValueType{Kind: KindString, Format: "digest"}
)

// volatileTypes are the built-in types whose reads are not guarded (see FactType.Volatile).
var volatileTypes = map[string]bool{"observed.clock": true}

// leasedTypes are the built-in types valid only on an etcd lease (see FactType.Leased).
var leasedTypes = map[string]bool{"lease.node": true}

// VolatileKeys returns the keys of the volatile built-in types (they have no variables).
func VolatileKeys() map[string]bool {
	out := map[string]bool{}
	for _, b := range builtins {
		if volatileTypes[b.name] {
			out[b.tmpl] = true
		}
	}
	return out
}

type builtin struct {
	name, tmpl string
	vt         ValueType
	doc        string
}

var builtins = []builtin{
	{"desired.service", "desired/service/{name}", vObject, "A service exists; its attributes are the keys below it."},
	{"desired.service.image", "desired/service/{name}/image", vImage, "The container image of the service."},
	{"desired.service.instances", "desired/service/{name}/instances", vInstN, "The number of instances the user asked for."},
	{"desired.service.expose", "desired/service/{name}/expose/{port}", vObject, "A port the service exposes."},
	{"desired.service.resources.cpu", "desired/service/{name}/resources/cpu", vCPU, "Cpu requested per instance, in cores."},
	{"desired.service.resources.memory", "desired/service/{name}/resources/memory", vMemory, "Memory requested per instance."},
	{"desired.service.health.method", "desired/service/{name}/health/method", vMethod, "How the agent checks an instance's health."},
	{"desired.service.health.path", "desired/service/{name}/health/path", vPath, "The HTTP path of the health check."},
	{"desired.service.health.interval", "desired/service/{name}/health/interval", vDur, "Time between health checks."},
	{"desired.service.health.failures", "desired/service/{name}/health/failures", vChecks, "Consecutive failed health checks after which an instance is replaced."},
	{"desired.service.autoscale.metric", "desired/service/{name}/autoscale/metric", vName, "The metric the autoscaler follows, e.g. cpu."},
	{"desired.service.autoscale.threshold", "desired/service/{name}/autoscale/threshold", vThresh, "The per-instance target of the metric."},
	{"desired.service.autoscale.min", "desired/service/{name}/autoscale/min", vInstN, "The fewest instances the autoscaler may ask for."},
	{"desired.service.autoscale.max", "desired/service/{name}/autoscale/max", vInstN, "The most instances the autoscaler may ask for."},
	{"desired.service.autoscale.stabilization", "desired/service/{name}/autoscale/stabilization", vDur, "How long the autoscaler keeps its highest recommendation before scaling down (default 300s)."},
	{"desired.service.placement.architecture", "desired/service/{name}/placement/architecture", vName, "Instances run only on nodes of this architecture."},
	{"desired.service.placement.zone", "desired/service/{name}/placement/zone", vName, "Instances run only on nodes in this zone."},
	{"desired.service.update.max_unavailable", "desired/service/{name}/update/max_unavailable", vInstN, "Instances a rollout may take below the target."},
	{"desired.service.update.max_extra", "desired/service/{name}/update/max_extra", vInstN, "Instances a rollout may add above the target."},
	{"desired.service.volume", "desired/service/{name}/volume", vName, "The volume the service's instances mount, at /volumes/{volume}."},
	{"desired.service.command", "desired/service/{name}/command", vStrings, "What the instances run instead of the image's entrypoint: the program and its arguments, e.g. [\"/bin/sh\", \"-c\", \"echo hi\"]."},
	{"desired.service.args", "desired/service/{name}/args", vStrings, "Arguments given to the command (or to the image's entrypoint), instead of the image's own."},
	{"desired.service.env", "desired/service/{name}/env/{var}", vString, "An environment variable of the instances' process, added to the image's environment."},
	{"desired.service.labels", "desired/service/{name}/labels/{label}", vString, "A label of the service, set on its instances' containers."},
	{"desired.service.restart.attempts", "desired/service/{name}/restart/attempts", vCount, "Consecutive failures replaced after restart/delay before the delay starts doubling (default 1)."},
	{"desired.service.restart.delay", "desired/service/{name}/restart/delay", vDur, "How long a failed instance's replacement waits after the first failures (default 1s)."},
	{"desired.service.restart.max_delay", "desired/service/{name}/restart/max_delay", vDur, "The longest a replacement waits, however many failures came before (default 5m)."},
	{"desired.service.restart.interval", "desired/service/{name}/restart/interval", vDur, "A service without a failure for this long starts again from restart/delay (default 10m)."},
	{"desired.history.service", "desired/history/service/{name}/{event-id}", vAnyJSON, "A spec of the service as an apply made it, written in the apply's transaction under the id of its record under event/: {\"event\": \"event/{event-id}\", \"facts\": {key: value}} with every desired/service/{name} fact and the user's intent. The last 5 are kept (ccattler rollback restores one); user-written like desired/, and checked like a file when restored."},
	{"desired.volume", "desired/volume/{name}", vObject, "A volume exists; its attributes are the keys below it."},
	{"desired.volume.size", "desired/volume/{name}/size", vMemory, "The size of the volume."},
	{"desired.volume.persistent", "desired/volume/{name}/persistent", vBool, "Whether the volume's data outlives its instances."},
	{"desired.volume.access_mode", "desired/volume/{name}/access_mode", vAccess, "Whether instances on one node or on many may use the volume."},

	{"effective.service.instances", "effective/service/{name}/instances", vInstN, "The target after user, autoscaler and policy intents are resolved."},

	{"observed.node", "observed/node/{node-id}", vObject, "A node has registered."},
	{"observed.node.state", "observed/node/{node-id}/state", vNodeSt, "Whether the node is alive, unreachable or draining."},
	{"observed.node.capacity.cpu", "observed/node/{node-id}/capacity/cpu", vCPU, "Cpu cores the node offers."},
	{"observed.node.capacity.memory", "observed/node/{node-id}/capacity/memory", vMemory, "Memory the node offers."},
	{"observed.node.available.cpu", "observed/node/{node-id}/available/cpu", vCPU, "Cpu cores the agent reports free."},
	{"observed.node.available.memory", "observed/node/{node-id}/available/memory", vMemory, "Memory the agent reports free."},
	{"observed.node.architecture", "observed/node/{node-id}/architecture", vName, "The node's cpu architecture, e.g. amd64."},
	{"observed.node.zone", "observed/node/{node-id}/zone", vName, "The node's zone."},
	{"observed.node.address", "observed/node/{node-id}/address", vIP, "The address the node's instances are reached at (host networking), written by its agent when it registers: an endpoint takes it, never an instance's own report."},
	{"observed.node.leased", "observed/node/{node-id}/leased", vBool, "The failure policy has seen the node hold lease/node/{node-id} on a live etcd lease: only such a node counts for placement, live instances and the mass-loss shares, so a node that never held a lease counts for nothing."},
	{"observed.instance.disowned", "observed/instance/{instance-id}/disowned", vName, "The node an instance's report names when it is not the node of its placement: the report is not believed (no endpoint, not counted) while it holds."},
	{"observed.node.cache_error", "observed/node/{node-id}/cache_error", vReason, "Why the agent could not read its local cache when it started; no container was stopped or started on its account. The failure policy records it."},
	{"observed.node.network", "observed/node/{node-id}/network", vNetwork, "host: the node's instances share its network, so an exposed port is taken on the whole node (the scheduler's port filter)."},
	{"observed.node.logs", "observed/node/{node-id}/logs", vAddr, "host:port where the node's agent serves its containers' output (ccattler logs)."},
	{"observed.node.lost_at", "observed/node/{node-id}/lost_at", vTime, "When the failure policy first saw the alive node without its lease outside a mass loss (the clock then); dropped during a mass loss, so the grace restarts when it ends."},
	{"observed.clock", "observed/clock", vTime, "The control plane's clock, written every second by the server: rules about elapsed time read it, so a decision that depends on time is explained by a fact."},
	{"observed.instance", "observed/instance/{instance-id}", vObject, "An instance exists."},
	{"observed.instance.service", "observed/instance/{instance-id}/service", vName, "The service the instance belongs to."},
	{"observed.instance.node", "observed/instance/{instance-id}/node", vName, "The node running the instance, as its agent reports."},
	{"observed.instance.state", "observed/instance/{instance-id}/state", vInstSt, "pending, running, failed or stopped."},
	{"observed.instance.image", "observed/instance/{instance-id}/image", vImage, "The image the instance runs."},
	{"observed.instance.ip", "observed/instance/{instance-id}/ip", vIP, "The instance's address."},
	{"observed.instance.health", "observed/instance/{instance-id}/health", vHealth, "The result of the instance's health checks."},
	{"observed.instance.started_at", "observed/instance/{instance-id}/started_at", vTime, "When the instance's container started."},
	{"observed.instance.resources.cpu", "observed/instance/{instance-id}/resources/cpu", vCPU, "The cpu limit the instance's container was started with, in cores (0: none)."},
	{"observed.instance.resources.memory", "observed/instance/{instance-id}/resources/memory", vMemory, "The memory limit the instance's container was started with (0: none)."},
	// A changed command, args, env or labels replaces the instances like a
	// changed image (policies/rollout.hcl): apply writes the digest of the
	// four with them, the agent reports back the digest its container was
	// started with, and the rollout compares the two.
	{"desired.service.spec_digest", "desired/service/{name}/spec_digest", vDigest, "A digest of the service's command, args, env and labels, written by apply in the same transaction as they are (absent when it sets none of them): an instance that reports another one is replaced by a rolling update."},
	{"observed.instance.spec_digest", "observed/instance/{instance-id}/spec_digest", vDigest, "The desired/service/{name}/spec_digest the instance's container was started with, as its agent reports (absent when the service had none)."},
	{"observed.instance.reason", "observed/instance/{instance-id}/reason", vReason, "Why the instance failed, as its agent reports: the start error (image pull, port clash, invalid spec) or how its process ended."},
	{"observed.instance.exit_status", "observed/instance/{instance-id}/exit_status", vCount, "The exit status of the failed instance's process, as its agent reports (absent when it never ran)."},
	{"observed.instance.unhealthy_since", "observed/instance/{instance-id}/unhealthy_since", vTime, "When the health policy first saw the running instance unhealthy (the clock then); gone once it is healthy again."},
	{"observed.instance.failed_at", "observed/instance/{instance-id}/failed_at", vTime, "When the health policy first saw the instance failed."},
	{"observed.instance.retiring", "observed/instance/{instance-id}/retiring", vRetire, "The instance is to be replaced, and why: a replacement starts first, then it is stopped."},
	{"observed.service.metrics", "observed/service/{name}/metrics/{metric}/{instance-id}", vMetric, "A measure of one instance of the service, as its agent reports it (cpu: cores in use)."},
	{"observed.service.autoscale.recommendation", "observed/service/{name}/autoscale/recommendation", vCount, "The autoscaler's recommendation for a service now, from its instances' metrics."},
	{"observed.service.autoscale.seen", "observed/service/{name}/autoscale/seen/{count}", vTime, "When the autoscaler last recommended this many instances: its scale-down stabilization window."},
	{"observed.service.rollout", "observed/service/{name}/rollout", vRollout, "A service's rollout: the image, how many live instances run it of the target, and whether it progresses, is halted (and why) or is complete."},
	{"observed.service.restart.failures", "observed/service/{name}/restart/failures", vCount, "Consecutive failures of the service's instances (failures noted together count once); gone after restart/interval without one."},
	{"observed.service.restart.last_failure", "observed/service/{name}/restart/last_failure", vTime, "When the restart policy last counted a failure of the service; each failure is counted once."},
	{"observed.service.restart.reason", "observed/service/{name}/restart/reason", vReason, "The last failure's reason, from the agent's report: what `ccattler get services` shows while the service fails."},
	{"observed.service.restart.image", "observed/service/{name}/restart/image", vImage, "The image the service's last counted failure ran or tried to start: applying another one ends the backoff."},
	{"observed.service.restart.hold", "observed/service/{name}/restart/hold", vTime, "No instance of the service is created before this time: the backoff after its last failure."},
	{"observed.service.summary", "observed/service/{name}/summary", vSummary, "What `ccattler get services` counts of a service's instances, derived by a summary (docs/rules.md) after every rule of a round: running (state running), healthy (health healthy), updated (both, on the service's desired image), target (effective, else desired instances) and, while some wait for a placement, unplaced. For people: no rule reads it."},
	{"observed.disruption.cluster", "observed/disruption/cluster", vDisrupt, "More nodes than the failure policy's share lost their leases together: no node is marked unreachable while it holds."},
	{"observed.disruption.zone", "observed/disruption/zone/{name}", vDisrupt, "More of a zone's nodes than the failure policy's share lost their leases together: none of them is marked unreachable while it holds."},
	{"observed.instance.stopped_at", "observed/instance/{instance-id}/stopped_at", vTime, "When the instance was first seen stopped or failed without a placement (the clock then); garbage collection counts from it."},
	{"observed.volume.attached_node", "observed/volume/{name}/attached_node", vName, "The node the volume is attached to."},
	{"observed.volume.state", "observed/volume/{name}/state", vVolSt, "attached, detached or error."},

	{"placement.instance", "placement/instance/{instance-id}", vName, "The node the scheduler chose for the instance."},
	{"placement.node", "placement/node/{node-id}/{instance-id}", vName, "The service of an instance placed on the node: written and deleted with placement/instance/{instance-id} (policies/scheduler.hcl), so that an agent watches its own node's placements and not every one, and learns each instance's service from what only the engine writes."},
	{"placement.service.node", "placement/service/{name}/node", vName, "The node every instance of the service must run on: where its single-node volume is attached."},
	{"placement.service.colocate", "placement/service/{name}/colocate", vBool, "Every instance of the service runs on one node: it uses a single-node volume."},
	{"endpoint.service", "endpoint/service/{name}/{instance-id}", vEndpnt, "An address that serves the service."},
	{"intent.service.instances", "intent/{layer}/service/{name}/instances", vInstN, "One writer's wish for a service's instance count."},
	{"lease.node", "lease/node/{node-id}", vObject, "Held on a TTL lease by the node's agent while it is alive."},
	{"event", "event/{event-id}", vObject, "A record of a rule firing or of something the system did."},
	{"auth.rules", "auth/{principal}/rules", vAnyJSON, "The keys and prefixes a principal (user:{name}, node:{id}, engine, auditor: a client certificate's Common Name) may read and write, as a JSON list such as [{\"prefix\": \"observed/node/{node}/\", \"access\": \"readwrite\"}]; the server makes them etcd's users, roles and permissions (docs/security.md)."},
	{"schema", "schema/{fact-type}", vSchema, "A fact type registration."},
}

// Typed constructors, one per key form. Each returns the key relative to the root.

func DesiredService(name string) string    { return "desired/service/" + name }
func ServiceAttr(name, attr string) string { return "desired/service/" + name + "/" + attr }
func ServiceImage(name string) string      { return ServiceAttr(name, "image") }
func ServiceInstances(name string) string  { return ServiceAttr(name, "instances") }
func ServiceExpose(name string, port int) string {
	return ServiceAttr(name, "expose/"+strconv.Itoa(port))
}
func ServiceCPU(name string) string             { return ServiceAttr(name, "resources/cpu") }
func ServiceMemory(name string) string          { return ServiceAttr(name, "resources/memory") }
func ServiceHealthMethod(name string) string    { return ServiceAttr(name, "health/method") }
func ServiceHealthPath(name string) string      { return ServiceAttr(name, "health/path") }
func ServiceHealthInterval(name string) string  { return ServiceAttr(name, "health/interval") }
func ServiceHealthFailures(name string) string  { return ServiceAttr(name, "health/failures") }
func ServiceAutoscaleMetric(name string) string { return ServiceAttr(name, "autoscale/metric") }
func ServiceAutoscaleThreshold(name string) string {
	return ServiceAttr(name, "autoscale/threshold")
}
func ServiceAutoscaleStabilization(name string) string {
	return ServiceAttr(name, "autoscale/stabilization")
}
func ServiceAutoscaleMin(name string) string { return ServiceAttr(name, "autoscale/min") }
func ServiceAutoscaleMax(name string) string { return ServiceAttr(name, "autoscale/max") }
func ServicePlacementArchitecture(name string) string {
	return ServiceAttr(name, "placement/architecture")
}
func ServicePlacementZone(name string) string { return ServiceAttr(name, "placement/zone") }
func ServiceMaxUnavailable(name string) string {
	return ServiceAttr(name, "update/max_unavailable")
}
func ServiceMaxExtra(name string) string { return ServiceAttr(name, "update/max_extra") }

func ServiceVolume(name string) string        { return ServiceAttr(name, "volume") }
func DesiredVolume(name string) string        { return "desired/volume/" + name }
func VolumeSize(name string) string           { return DesiredVolume(name) + "/size" }
func VolumePersistent(name string) string     { return DesiredVolume(name) + "/persistent" }
func VolumeAccessMode(name string) string     { return DesiredVolume(name) + "/access_mode" }
func EffectiveInstances(name string) string   { return "effective/service/" + name + "/instances" }
func Node(id string) string                   { return "observed/node/" + id }
func NodeAttr(id, attr string) string         { return "observed/node/" + id + "/" + attr }
func NodeState(id string) string              { return NodeAttr(id, "state") }
func NodeCapacityCPU(id string) string        { return NodeAttr(id, "capacity/cpu") }
func NodeCapacityMemory(id string) string     { return NodeAttr(id, "capacity/memory") }
func NodeAvailableCPU(id string) string       { return NodeAttr(id, "available/cpu") }
func NodeAvailableMemory(id string) string    { return NodeAttr(id, "available/memory") }
func NodeArchitecture(id string) string       { return NodeAttr(id, "architecture") }
func NodeZone(id string) string               { return NodeAttr(id, "zone") }
func NodeLostAt(id string) string             { return NodeAttr(id, "lost_at") }
func NodeAddress(id string) string            { return NodeAttr(id, "address") }
func NodeLeased(id string) string             { return NodeAttr(id, "leased") }
func InstanceDisowned(id string) string       { return InstanceAttr(id, "disowned") }
func Clock() string                           { return "observed/clock" }
func Instance(id string) string               { return "observed/instance/" + id }
func InstanceAttr(id, attr string) string     { return "observed/instance/" + id + "/" + attr }
func InstanceService(id string) string        { return InstanceAttr(id, "service") }
func InstanceNode(id string) string           { return InstanceAttr(id, "node") }
func InstanceState(id string) string          { return InstanceAttr(id, "state") }
func InstanceImage(id string) string          { return InstanceAttr(id, "image") }
func InstanceIP(id string) string             { return InstanceAttr(id, "ip") }
func InstanceHealth(id string) string         { return InstanceAttr(id, "health") }
func InstanceCPU(id string) string            { return InstanceAttr(id, "resources/cpu") }
func InstanceMemory(id string) string         { return InstanceAttr(id, "resources/memory") }
func InstanceSpecDigest(id string) string     { return InstanceAttr(id, "spec_digest") }
func ServiceSpecDigest(name string) string    { return ServiceAttr(name, "spec_digest") }
func InstanceStartedAt(id string) string      { return InstanceAttr(id, "started_at") }
func InstanceStoppedAt(id string) string      { return InstanceAttr(id, "stopped_at") }
func InstanceUnhealthySince(id string) string { return InstanceAttr(id, "unhealthy_since") }
func InstanceRetiring(id string) string       { return InstanceAttr(id, "retiring") }
func ServiceMetric(name, metric, id string) string {
	return "observed/service/" + name + "/metrics/" + metric + "/" + id
}
func AutoscaleRecommendation(name string) string {
	return "observed/service/" + name + "/autoscale/recommendation"
}
func AutoscaleSeen(name string, count int) string {
	return "observed/service/" + name + "/autoscale/seen/" + strconv.Itoa(count)
}
func InstanceFailedAt(id string) string     { return InstanceAttr(id, "failed_at") }
func ServiceRollout(name string) string     { return "observed/service/" + name + "/rollout" }
func ServiceSummary(name string) string     { return "observed/service/" + name + "/summary" }
func ClusterDisruption() string             { return "observed/disruption/cluster" }
func ZoneDisruption(zone string) string     { return "observed/disruption/zone/" + zone }
func VolumeAttachedNode(name string) string { return "observed/volume/" + name + "/attached_node" }
func VolumeState(name string) string        { return "observed/volume/" + name + "/state" }
func Placement(id string) string            { return "placement/instance/" + id }
func NodePlacement(node, id string) string  { return NodePlacements(node) + id }
func NodePlacements(node string) string     { return "placement/node/" + node + "/" }
func ServiceColocate(name string) string    { return "placement/service/" + name + "/colocate" }
func ServicePin(name string) string         { return "placement/service/" + name + "/node" }
func Endpoint(service, id string) string    { return "endpoint/service/" + service + "/" + id }
func Intent(layer, service string) string {
	return "intent/" + layer + "/service/" + service + "/instances"
}
func Lease(node string) string { return "lease/node/" + node }
func Event(id string) string   { return "event/" + id }

// IsRecord reports whether key is a firing record's (Event): what no
// rule may read.
func IsRecord(key string) bool          { return strings.HasPrefix(key, "event/") }
func AuthRules(principal string) string { return "auth/" + principal + "/rules" }
func SchemaKey(factType string) string  { return "schema/" + factType }

// Key forms of the service lifecycle: what a service runs, its restart
// policy and the state of its failures, and what nodes say of themselves.

func ServiceCommand(name string) string       { return ServiceAttr(name, "command") }
func ServiceArgs(name string) string          { return ServiceAttr(name, "args") }
func ServiceEnv(name, v string) string        { return ServiceAttr(name, "env/"+v) }
func ServiceLabel(name, label string) string  { return ServiceAttr(name, "labels/"+label) }
func ServiceRestart(name, attr string) string { return ServiceAttr(name, "restart/"+attr) }
func InstanceReason(id string) string         { return InstanceAttr(id, "reason") }
func InstanceExitStatus(id string) string     { return InstanceAttr(id, "exit_status") }
func NodeCacheError(id string) string         { return NodeAttr(id, "cache_error") }
func NodeNetwork(id string) string            { return NodeAttr(id, "network") }
func NodeLogs(id string) string               { return NodeAttr(id, "logs") }
func RestartState(name, attr string) string   { return "observed/service/" + name + "/restart/" + attr }

// ServiceHistory is one applied spec of a service; id "" gives the prefix of them all.
func ServiceHistory(name, id string) string { return "desired/history/service/" + name + "/" + id }
