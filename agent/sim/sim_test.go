package sim

import (
	"context"
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
