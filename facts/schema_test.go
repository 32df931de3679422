package facts

import (
	"slices"
	"strings"
	"testing"
)

// Every key form of the seed, with the seed's literal examples where it has them.
func TestKeyRoundTrip(t *testing.T) {
	tests := []struct {
		key  string
		typ  string
		args []string
		ctor string // the typed constructor's output, when one applies
	}{
		{"desired/service/web", "desired.service", []string{"web"}, DesiredService("web")},
		{"desired/service/web/image", "desired.service.image", []string{"web"}, ServiceImage("web")},
		{"desired/service/web/instances", "desired.service.instances", []string{"web"}, ServiceInstances("web")},
		{"desired/service/web/expose/8080", "desired.service.expose", []string{"web", "8080"}, ServiceExpose("web", 8080)},
		{"desired/service/web/resources/cpu", "desired.service.resources.cpu", []string{"web"}, ServiceCPU("web")},
		{"desired/service/web/resources/memory", "desired.service.resources.memory", []string{"web"}, ServiceMemory("web")},
		{"desired/service/web/health/method", "desired.service.health.method", []string{"web"}, ServiceHealthMethod("web")},
		{"desired/service/web/health/path", "desired.service.health.path", []string{"web"}, ServiceHealthPath("web")},
		{"desired/service/web/health/interval", "desired.service.health.interval", []string{"web"}, ServiceHealthInterval("web")},
		{"desired/service/web/health/failures", "desired.service.health.failures", []string{"web"}, ServiceHealthFailures("web")},
		{"desired/service/web/autoscale/metric", "desired.service.autoscale.metric", []string{"web"}, ServiceAutoscaleMetric("web")},
		{"desired/service/web/autoscale/threshold", "desired.service.autoscale.threshold", []string{"web"}, ServiceAutoscaleThreshold("web")},
		{"desired/service/web/autoscale/min", "desired.service.autoscale.min", []string{"web"}, ServiceAutoscaleMin("web")},
		{"desired/service/web/autoscale/max", "desired.service.autoscale.max", []string{"web"}, ServiceAutoscaleMax("web")},
		{"desired/service/web/autoscale/stabilization", "desired.service.autoscale.stabilization", []string{"web"}, ServiceAutoscaleStabilization("web")},
		{"desired/service/web/placement/architecture", "desired.service.placement.architecture", []string{"web"}, ServicePlacementArchitecture("web")},
		{"desired/service/web/placement/zone", "desired.service.placement.zone", []string{"web"}, ServicePlacementZone("web")},
		{"desired/service/web/update/max_unavailable", "desired.service.update.max_unavailable", []string{"web"}, ServiceMaxUnavailable("web")},
		{"desired/service/web/update/max_extra", "desired.service.update.max_extra", []string{"web"}, ServiceMaxExtra("web")},
		{"desired/service/web/volume", "desired.service.volume", []string{"web"}, ServiceVolume("web")},
		{"desired/service/web/command", "desired.service.command", []string{"web"}, ServiceCommand("web")},
		{"desired/service/web/args", "desired.service.args", []string{"web"}, ServiceArgs("web")},
		{"desired/service/web/env/GREETING", "desired.service.env", []string{"web", "GREETING"}, ServiceEnv("web", "GREETING")},
		{"desired/service/web/labels/team", "desired.service.labels", []string{"web", "team"}, ServiceLabel("web", "team")},
		{"desired/service/web/restart/attempts", "desired.service.restart.attempts", []string{"web"}, ServiceRestart("web", "attempts")},
		{"desired/service/web/restart/delay", "desired.service.restart.delay", []string{"web"}, ServiceRestart("web", "delay")},
		{"desired/service/web/restart/max_delay", "desired.service.restart.max_delay", []string{"web"}, ServiceRestart("web", "max_delay")},
		{"desired/service/web/restart/interval", "desired.service.restart.interval", []string{"web"}, ServiceRestart("web", "interval")},
		{"observed/instance/a8f31/reason", "observed.instance.reason", []string{"a8f31"}, InstanceReason("a8f31")},
		{"observed/instance/a8f31/exit_status", "observed.instance.exit_status", []string{"a8f31"}, InstanceExitStatus("a8f31")},
		{"observed/node/node-2/cache_error", "observed.node.cache_error", []string{"node-2"}, NodeCacheError("node-2")},
		{"observed/node/node-2/network", "observed.node.network", []string{"node-2"}, NodeNetwork("node-2")},
		{"observed/node/node-2/logs", "observed.node.logs", []string{"node-2"}, NodeLogs("node-2")},
		{"observed/service/web/restart/failures", "observed.service.restart.failures", []string{"web"}, RestartState("web", "failures")},
		{"observed/service/web/restart/last_failure", "observed.service.restart.last_failure", []string{"web"}, RestartState("web", "last_failure")},
		{"observed/service/web/restart/reason", "observed.service.restart.reason", []string{"web"}, RestartState("web", "reason")},
		{"observed/service/web/restart/image", "observed.service.restart.image", []string{"web"}, RestartState("web", "image")},
		{"observed/service/web/restart/hold", "observed.service.restart.hold", []string{"web"}, RestartState("web", "hold")},
		{"desired/history/service/web/20261129T185454.000000001Z-000001", "desired.history.service", []string{"web", "20261129T185454.000000001Z-000001"}, ServiceHistory("web", "20261129T185454.000000001Z-000001")},
		{"desired/volume/data", "desired.volume", []string{"data"}, DesiredVolume("data")},
		{"desired/volume/data/size", "desired.volume.size", []string{"data"}, VolumeSize("data")},
		{"desired/volume/data/persistent", "desired.volume.persistent", []string{"data"}, VolumePersistent("data")},
		{"desired/volume/data/access_mode", "desired.volume.access_mode", []string{"data"}, VolumeAccessMode("data")},
		{"effective/service/web/instances", "effective.service.instances", []string{"web"}, EffectiveInstances("web")},
		{"observed/node/node-2", "observed.node", []string{"node-2"}, Node("node-2")},
		{"observed/node/node-2/state", "observed.node.state", []string{"node-2"}, NodeState("node-2")},
		{"observed/node/node-2/capacity/cpu", "observed.node.capacity.cpu", []string{"node-2"}, NodeCapacityCPU("node-2")},
		{"observed/node/node-2/capacity/memory", "observed.node.capacity.memory", []string{"node-2"}, NodeCapacityMemory("node-2")},
		{"observed/node/node-2/available/cpu", "observed.node.available.cpu", []string{"node-2"}, NodeAvailableCPU("node-2")},
		{"observed/node/node-2/available/memory", "observed.node.available.memory", []string{"node-2"}, NodeAvailableMemory("node-2")},
		{"observed/node/node-2/architecture", "observed.node.architecture", []string{"node-2"}, NodeArchitecture("node-2")},
		{"observed/node/node-2/zone", "observed.node.zone", []string{"node-2"}, NodeZone("node-2")},
		{"observed/node/node-2/lost_at", "observed.node.lost_at", []string{"node-2"}, NodeLostAt("node-2")},
		{"observed/node/node-2/address", "observed.node.address", []string{"node-2"}, NodeAddress("node-2")},
		{"observed/node/node-2/leased", "observed.node.leased", []string{"node-2"}, NodeLeased("node-2")},
		{"observed/instance/a8f31/disowned", "observed.instance.disowned", []string{"a8f31"}, InstanceDisowned("a8f31")},
		{"observed/clock", "observed.clock", nil, Clock()},
		{"observed/instance/a8f31", "observed.instance", []string{"a8f31"}, Instance("a8f31")},
		{"observed/instance/a8f31/service", "observed.instance.service", []string{"a8f31"}, InstanceService("a8f31")},
		{"observed/instance/a8f31/node", "observed.instance.node", []string{"a8f31"}, InstanceNode("a8f31")},
		{"observed/instance/a8f31/state", "observed.instance.state", []string{"a8f31"}, InstanceState("a8f31")},
		{"observed/instance/a8f31/image", "observed.instance.image", []string{"a8f31"}, InstanceImage("a8f31")},
		{"observed/instance/a8f31/ip", "observed.instance.ip", []string{"a8f31"}, InstanceIP("a8f31")},
		{"observed/instance/a8f31/health", "observed.instance.health", []string{"a8f31"}, InstanceHealth("a8f31")},
		{"observed/instance/a8f31/started_at", "observed.instance.started_at", []string{"a8f31"}, InstanceStartedAt("a8f31")},
		{"observed/instance/a8f31/resources/cpu", "observed.instance.resources.cpu", []string{"a8f31"}, InstanceCPU("a8f31")},
		{"observed/instance/a8f31/resources/memory", "observed.instance.resources.memory", []string{"a8f31"}, InstanceMemory("a8f31")},
		{"observed/instance/a8f31/spec_digest", "observed.instance.spec_digest", []string{"a8f31"}, InstanceSpecDigest("a8f31")},
		{"desired/service/web/spec_digest", "desired.service.spec_digest", []string{"web"}, ServiceSpecDigest("web")},
		{"observed/instance/a8f31/unhealthy_since", "observed.instance.unhealthy_since", []string{"a8f31"}, InstanceUnhealthySince("a8f31")},
		{"observed/service/web/metrics/cpu/a8f31", "observed.service.metrics", []string{"web", "cpu", "a8f31"}, ServiceMetric("web", "cpu", "a8f31")},
		{"observed/service/web/autoscale/recommendation", "observed.service.autoscale.recommendation", []string{"web"}, AutoscaleRecommendation("web")},
		{"observed/service/web/autoscale/seen/4", "observed.service.autoscale.seen", []string{"web", "4"}, AutoscaleSeen("web", 4)},
		{"observed/instance/a8f31/failed_at", "observed.instance.failed_at", []string{"a8f31"}, InstanceFailedAt("a8f31")},
		{"observed/instance/a8f31/retiring", "observed.instance.retiring", []string{"a8f31"}, InstanceRetiring("a8f31")},
		{"observed/service/web/rollout", "observed.service.rollout", []string{"web"}, ServiceRollout("web")},
		{"observed/service/web/summary", "observed.service.summary", []string{"web"}, ServiceSummary("web")},
		{"observed/disruption/cluster", "observed.disruption.cluster", nil, ClusterDisruption()},
		{"observed/disruption/zone/eu-1a", "observed.disruption.zone", []string{"eu-1a"}, ZoneDisruption("eu-1a")},
		{"observed/instance/a8f31/stopped_at", "observed.instance.stopped_at", []string{"a8f31"}, InstanceStoppedAt("a8f31")},
		{"observed/volume/data/attached_node", "observed.volume.attached_node", []string{"data"}, VolumeAttachedNode("data")},
		{"observed/volume/data/state", "observed.volume.state", []string{"data"}, VolumeState("data")},
		{"placement/instance/d41ab", "placement.instance", []string{"d41ab"}, Placement("d41ab")},
		{"placement/node/node-3/d41ab", "placement.node", []string{"node-3", "d41ab"}, NodePlacement("node-3", "d41ab")},
		{"placement/service/db/node", "placement.service.node", []string{"db"}, ServicePin("db")},
		{"placement/service/db/colocate", "placement.service.colocate", []string{"db"}, ServiceColocate("db")},
		{"endpoint/service/web/b72c9", "endpoint.service", []string{"web", "b72c9"}, Endpoint("web", "b72c9")},
		{"intent/user/service/web/instances", "intent.service.instances", []string{"user", "web"}, Intent("user", "web")},
		{"intent/autoscaler/service/web/instances", "intent.service.instances", []string{"autoscaler", "web"}, Intent("autoscaler", "web")},
		{"intent/policy/service/web/instances", "intent.service.instances", []string{"policy", "web"}, Intent("policy", "web")},
		{"lease/node/node-2", "lease.node", []string{"node-2"}, Lease("node-2")},
		{"event/20261129T185454.000000001Z-000001", "event", []string{"20261129T185454.000000001Z-000001"}, Event("20261129T185454.000000001Z-000001")},
		{"auth/node:node-1/rules", "auth.rules", []string{"node:node-1"}, AuthRules("node:node-1")},
		{"schema/observed.node.capacity.gpu", "schema", []string{"observed.node.capacity.gpu"}, SchemaKey("observed.node.capacity.gpu")},
	}
	s := NewSchema()
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			k, err := s.Parse(tt.key)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if k.Type.Name != tt.typ {
				t.Errorf("type = %s, want %s", k.Type.Name, tt.typ)
			}
			if strings.Join(k.Args, ",") != strings.Join(tt.args, ",") {
				t.Errorf("args = %v, want %v", k.Args, tt.args)
			}
			if got := k.String(); got != tt.key {
				t.Errorf("String() = %q, want %q", got, tt.key)
			}
			if tt.ctor != tt.key {
				t.Errorf("constructor = %q, want %q", tt.ctor, tt.key)
			}
			if byTmpl, ok := s.TypeOf(k.Type.Template); !ok || byTmpl != k.Type {
				t.Errorf("TypeOf(%s) did not find the type", k.Type.Template)
			}
		})
		seen[tt.typ] = true
	}
	for _, ft := range s.Types() {
		if !seen[ft.Name] {
			t.Errorf("built-in %s (%s) has no round-trip case", ft.Name, ft.Template)
		}
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct{ key, want string }{
		{"desired/service/Web/image", "not a valid name"},
		{"desired/service//image", "matches no key form"},
		{"desired/service/web/expose/0", "not a valid port"},
		{"desired/service/web/expose/65536", "not a valid port"},
		{"desired/service/web/expose/080", "not a valid port"},
		{"observed/instance/XYZ12/state", "not a valid instance-id"},
		{"observed/instance/abc/state", "not a valid instance-id"},
		{"intent/admin/service/web/instances", "not a valid intent layer"},
		{"desired/service/web/colour", "matches no key form"},
		{"nothing", "matches no key form"},
		{"desired/service/" + strings.Repeat("a", 64), "not a valid name"},
		{"event/yesterday-1", "not a valid event id"},
	}
	s := NewSchema()
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, err := s.Parse(tt.key)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) = %v, want error containing %q", tt.key, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q does not name the key", err)
			}
		})
	}
}

// The seed's values, stored exactly as the seed writes them.
func TestSeedValues(t *testing.T) {
	tests := []struct {
		key   string
		value any
		want  string
	}{
		{"desired/service/web", map[string]any{}, `{}`},
		{"desired/service/web/image", "nginx:1.28", `"nginx:1.28"`},
		{"desired/service/web/instances", 3, `3`},
		{"desired/service/web/expose/8080", map[string]any{}, `{}`},
		{"intent/user/service/web/instances", 3, `3`},
		{"effective/service/web/instances", 3, `3`},
		{"observed/instance/a8f31/service", "web", `"web"`},
		{"observed/instance/a8f31/state", "pending", `"pending"`},
		{"placement/instance/a8f31", "node-1", `"node-1"`},
		{"observed/instance/a8f31/node", "node-1", `"node-1"`},
		{"observed/instance/a8f31/ip", "10.1.0.5", `"10.1.0.5"`},
		{"observed/instance/a8f31/health", "healthy", `"healthy"`},
		{"endpoint/service/web/a8f31", map[string]any{"ip": "10.1.0.5", "port": 8080}, `{"ip": "10.1.0.5", "port": 8080}`},
		{"observed/node/node-2/state", "unreachable", `"unreachable"`},
		{"desired/service/web/resources/cpu", "500m", `0.5`},
		{"desired/service/web/resources/memory", "256Mi", `"256Mi"`},
		{"desired/service/web/resources/memory", int64(256 << 20), `"256Mi"`},
		{"desired/service/web/health/interval", "10s", `"10s"`},
		{"desired/volume/data/persistent", true, `true`},
		{"desired/service/web/autoscale/threshold", 0.7, `0.7`},
		{"desired/service/web/command", []any{"/bin/sh", "-c", "echo hi"}, `["/bin/sh", "-c", "echo hi"]`},
		{"observed/instance/a8f31/spec_digest", "2f5fe11ad9e492f8", `"2f5fe11ad9e492f8"`},
		{"observed/node/node-2/logs", "127.0.0.1:7070", `"127.0.0.1:7070"`},
	}
	s := NewSchema()
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.want, func(t *testing.T) {
			raw, err := s.Encode(tt.key, tt.value)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if string(raw) != tt.want {
				t.Fatalf("Encode = %s, want %s", raw, tt.want)
			}
			if _, err := s.Validate(tt.key, raw); err != nil {
				t.Fatalf("Validate(own encoding): %v", err)
			}
		})
	}
}

// A failure's reason is free text from an agent: bounded, so that one node
// cannot fill etcd or every reader's screen through it.
func TestReasonIsBounded(t *testing.T) {
	s := NewSchema()
	if _, err := s.Validate(InstanceReason("a8f31"), []byte(`"`+strings.Repeat("x", MaxReason)+`"`)); err != nil {
		t.Fatalf("a reason of MaxReason bytes: %v", err)
	}
	_, err := s.Validate(InstanceReason("a8f31"), []byte(`"`+strings.Repeat("x", MaxReason+1)+`"`))
	if err == nil || !strings.Contains(err.Error(), "at most 1024 bytes") {
		t.Fatalf("a reason one byte too long: %v", err)
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct{ key, raw, want string }{
		{"observed/instance/a8f31/state", `"sleeping"`, "expected one of pending|running|failed|stopped"},
		{"observed/node/n1/state", `"gone"`, "expected one of alive|unreachable|draining"},
		{"observed/volume/v/state", `"lost"`, "expected one of attached|detached|error"},
		{"desired/service/web/instances", `-1`, "expected an integer from 0 to 10000"},
		{"desired/service/web/instances", `"3"`, "expected an integer"},
		{"desired/service/web/instances", `3.5`, "expected an integer"},
		{"desired/service/web/resources/memory", `"12XB"`, "expected a memory quantity"},
		{"desired/service/web/resources/cpu", `-1`, "expected a cpu quantity"},
		{"desired/service/web/health/interval", `"soon"`, "expected a duration"},
		{"desired/service/web/health/path", `"healthz"`, `starting with "/"`},
		{"desired/service/web/spec_digest", `"2F5FE11AD9E492F8"`, "16 lowercase hex digits"},
		{"observed/instance/a8f31/spec_digest", `"2f5fe11ad9e492f"`, "16 lowercase hex digits"},
		{"observed/instance/a8f31/spec_digest", `"2f5fe11ad9e492f8 "`, "16 lowercase hex digits"},
		{"endpoint/service/web/a8f31", `{"ip": "10.1.0.5"}`, `missing field "port"`},
		{"endpoint/service/web/a8f31", `{"ip": "nowhere", "port": 80}`, `field "ip"`},
		{"observed/instance/a8f31/started_at", `"yesterday"`, "RFC 3339"},
		{"desired/service/web", `[]`, "expected a JSON object"},
		{"desired/service/web/image", `nginx`, "not JSON"},
		{"desired/service/web/image", `"a" "b"`, "trailing data"},
		{"desired/service/web/command", `"echo hi"`, "expected a JSON array of strings"},
		{"desired/service/web/args", `["-n", 3]`, "expected a JSON array of strings"},
		{"observed/node/n1/logs", `"localhost"`, "host:port"},
		{"observed/node/n1/network", `"bridge"`, "expected one of host"},
	}
	s := NewSchema()
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.raw, func(t *testing.T) {
			_, err := s.Validate(tt.key, []byte(tt.raw))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want error containing %q", err, tt.want)
			}
			for _, part := range []string{tt.key, tt.raw} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not name %q", err, part)
				}
			}
		})
	}
}

func TestMemoryQuantities(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"256Mi", 256 << 20, true}, {"1Gi", 1 << 30, true}, {"1.5Gi", 3 << 29, true},
		{"100M", 100e6, true}, {"512", 512, true}, {"10Ki", 10240, true},
		{"12XB", 0, false}, {"", 0, false}, {"-1Mi", 0, false}, {"Mi", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseMemory(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	if got := FormatMemory(256 << 20); got != "256Mi" {
		t.Errorf("FormatMemory = %s", got)
	}
	if got := FormatMemory(1000); got != "1000" {
		t.Errorf("FormatMemory(1000) = %s", got)
	}
}

func TestPluginRegistration(t *testing.T) {
	s := NewSchema()
	if _, err := s.Parse("observed/node/n1/capacity/gpu"); err == nil {
		t.Fatal("gpu capacity parsed before registration")
	}
	reg := EncodeRegistration(Registration{Key: "observed/node/{node-id}/capacity/gpu", Type: "int", Min: f(0), Doc: "GPUs on the node."})
	if err := s.RegisterFrom("observed.node.capacity.gpu", reg); err != nil {
		t.Fatal(err)
	}
	k, err := s.Validate("observed/node/n1/capacity/gpu", []byte("2"))
	if err != nil {
		t.Fatal(err)
	}
	if k.Var("node-id") != "n1" {
		t.Errorf("node-id = %q", k.Var("node-id"))
	}
	if _, err := s.Validate("observed/node/n1/capacity/gpu", []byte("-2")); err == nil {
		t.Error("negative gpu count accepted")
	}
	// Idempotent; a clash is an error.
	if err := s.RegisterFrom("observed.node.capacity.gpu", reg); err != nil {
		t.Errorf("re-registration: %v", err)
	}
	clash := EncodeRegistration(Registration{Key: "observed/node/{node-id}/capacity/gpu", Type: "string"})
	if err := s.RegisterFrom("other.gpu", clash); err == nil || !strings.Contains(err.Error(), "same shape") {
		t.Errorf("clashing template: %v", err)
	}
	if err := s.RegisterFrom("bad", []byte(`{"key": "x/{a}", "type": "colour"}`)); err == nil || !strings.Contains(err.Error(), "unknown value type") {
		t.Errorf("bad type: %v", err)
	}
	// The built-in registration is what RegisterBuiltins stores: it decodes back.
	ft, _ := s.Type("endpoint.service")
	if _, vt, err := ParseRegistration(EncodeRegistration(RegistrationOf(ft))); err != nil || vt.Fields["port"] != KindInt {
		t.Errorf("endpoint registration round trip: %v %v", vt, err)
	}
}

// FuzzParseKey: a key Parse accepts renders back as itself with valid
// segments; KeyType gives Parse's type or its error, and SplitKey splits as
// strings.Split does.
func FuzzParseKey(f *testing.F) {
	for _, k := range []string{
		"desired/service/web/expose/8080", "observed/instance/a8f31/state", "intent/user/service/web/instances",
		"event/20261129T185454.000000001Z-000001", "placement/instance/d41ab", "endpoint/service/web/b72c9",
		"", "/", "desired//", "desired/service/{name}", "schema/a.b",
		"observed/instance/a8f31/state/extra/1/2/3/4/5/6/7/8/9", "observed/instance/A B/state",
	} {
		f.Add(k)
	}
	s := NewSchema()
	f.Fuzz(func(t *testing.T, key string) {
		if got, want := SplitKey(nil, key), strings.Split(key, "/"); !slices.Equal(got, want) {
			t.Fatalf("SplitKey(%q) = %q; strings.Split gives %q", key, got, want)
		}
		k, err := s.Parse(key)
		kt, kerr := s.KeyType(key)
		if (err == nil) != (kerr == nil) || (err != nil && err.Error() != kerr.Error()) || (err == nil && kt != k.Type) {
			t.Fatalf("KeyType(%q) = %v, %v; Parse gives %v, %v", key, kt, kerr, k.Type, err)
		}
		if err != nil {
			return
		}
		if got := k.String(); got != key {
			t.Fatalf("Parse(%q).String() = %q", key, got)
		}
		for i, v := range k.Type.Vars {
			if err := CheckSegment(v, k.Args[i]); err != nil {
				t.Fatalf("Parse(%q) accepted a bad %s: %v", key, v, err)
			}
		}
	})
}

func TestCanonicalJSONOfAnyMap(t *testing.T) {
	type ep struct {
		IP   string `json:"ip"`
		Port int    `json:"port"`
	}
	for _, v := range []any{
		map[string]any{"port": 8080, "ip": "10.1.0.5"},
		map[string]int64{"port": 8080},
		ep{IP: "10.1.0.5", Port: 8080},
	} {
		raw, err := CanonicalJSON(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), `":`) && !strings.Contains(string(raw), `": `) {
			t.Errorf("CanonicalJSON(%#v) = %s: not the schema's separators", v, raw)
		}
	}
	raw, _ := Default.Encode("endpoint/service/web/a8f31", ep{IP: "10.1.0.5", Port: 8080})
	if string(raw) != `{"ip": "10.1.0.5", "port": 8080}` {
		t.Errorf("endpoint from a struct = %s", raw)
	}
}
