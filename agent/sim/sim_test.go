package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/agent"
)

func TestHealthByImage(t *testing.T) {
	cfg := NewConfig()
	cfg.StartDelay = 0
	f, err := NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := f.Node("sim-0001")
	for _, tt := range []struct{ id, image, want string }{
		{"a0001", "web:2", agent.Healthy},
		{"a0002", "web:2-unhealthy", agent.Unhealthy},
		{"a0003", "registry.local/unhealthy/web:1", agent.Unhealthy},
	} {
		t.Run(tt.image, func(t *testing.T) {
			st, err := rt.Start(context.Background(), agent.Spec{ID: tt.id, Service: "web", Image: tt.image})
			if err != nil {
				t.Fatal(err)
			}
			if st.Health != tt.want || st.Image != tt.image {
				t.Errorf("started %s: health %q image %q, want %q %q", tt.image, st.Health, st.Image, tt.want, tt.image)
			}
		})
	}
}

// TestUnpullableImage: an image marked unpullable never starts, and the
// error says what a real pull failure says.
func TestUnpullableImage(t *testing.T) {
	cfg := NewConfig()
	cfg.StartDelay = 0
	f, _ := NewFleet(cfg)
	rt := f.Node("sim-0001")
	_, err := rt.Start(context.Background(), agent.Spec{ID: "a0001", Service: "web", Image: "web:2-unpullable"})
	if err == nil || !strings.Contains(err.Error(), "could not be pulled") {
		t.Fatalf("start of an unpullable image: %v", err)
	}
	if l, _ := rt.List(context.Background()); len(l) != 0 {
		t.Fatalf("a failed start left %d containers", len(l))
	}
}

// TestHostNetworkPorts: with HostNetwork, a node's instances share one
// address and a port; another node, or a port freed by a stop, is fine.
func TestHostNetworkPorts(t *testing.T) {
	cfg := NewConfig()
	cfg.StartDelay, cfg.HostNetwork = 0, true
	f, _ := NewFleet(cfg)
	ctx := context.Background()
	n1, n2 := f.Node("sim-0001"), f.Node("sim-0002")
	a, err := n1.Start(ctx, agent.Spec{ID: "a0001", Service: "one", Image: "x:1", Ports: []int{8080}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := n1.Start(ctx, agent.Spec{ID: "a0002", Service: "other", Image: "x:1", Ports: []int{9090}})
	if err != nil {
		t.Fatal(err)
	}
	if a.IP != b.IP {
		t.Errorf("instances of one host-network node at %s and %s", a.IP, b.IP)
	}
	_, err = n1.Start(ctx, agent.Spec{ID: "b0001", Service: "two", Image: "x:1", Ports: []int{9443, 8080}})
	if err == nil || !strings.Contains(err.Error(), "port 8080 is already used by instance a0001") {
		t.Fatalf("second instance on 8080: %v", err)
	}
	if _, err := n2.Start(ctx, agent.Spec{ID: "b0001", Service: "two", Image: "x:1", Ports: []int{8080}}); err != nil {
		t.Fatalf("on another node: %v", err)
	}
	_ = n1.Stop(ctx, "a0001", 0)
	if _, err := n1.Start(ctx, agent.Spec{ID: "b0002", Service: "two", Image: "x:1", Ports: []int{8080}}); err != nil {
		t.Fatalf("after the holder stopped: %v", err)
	}
}
