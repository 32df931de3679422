package embedded_test

import (
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts/embedded"
)

// TestInitialClusterValidation: a mistaken --initial-cluster is an error
// naming the flag and what was expected, before any member starts.
func TestInitialClusterValidation(t *testing.T) {
	base := func() embedded.Config {
		c := embedded.NewConfig()
		c.Name, c.DataDir = "s1", t.TempDir()
		c.ClientURL, c.PeerURL = "https://127.0.0.1:2379", "https://127.0.0.1:2380"
		c.TLS = &embedded.TLS{}
		return c
	}
	for _, tc := range []struct {
		name, cluster, state, want string
		solo                       bool
	}{
		{"ok", "s1=https://127.0.0.1:2380,s2=https://127.0.0.2:2380", "", "", false},
		{"ok existing", "s1=https://127.0.0.1:2380,s2=https://127.0.0.2:2380", "existing", "", false},
		{"not a pair", "s1=https://127.0.0.1:2380,s2", "", `entry "s2": expected name=URL`, false},
		{"not a URL", "s1=127.0.0.1:2380", "", `expected name=URL`, false},
		{"own name missing", "s2=https://127.0.0.2:2380,s3=https://127.0.0.3:2380", "", `no member named "s1" (--name)`, false},
		{"own URL differs", "s1=https://127.0.0.9:2380,s2=https://127.0.0.2:2380", "", "but --listen-peer is https://127.0.0.1:2380", false},
		{"plain peer under TLS", "s1=https://127.0.0.1:2380,s2=http://127.0.0.2:2380", "", "the members serve https, so the URL is https://127.0.0.2:2380", false},
		{"bad state", "s1=https://127.0.0.1:2380", "joined", `--initial-cluster-state "joined": expected new or existing`, false},
		{"existing alone", "", "existing", "existing needs --initial-cluster", false},
		{"solo", "", "", "", true},
		{"solo in a cluster", "s1=https://127.0.0.1:2380,s2=https://127.0.0.2:2380", "", "a solo member has no cluster", true},
		{"solo joining", "s1=https://127.0.0.1:2380", "existing", "a solo member has no cluster", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			c.InitialCluster, c.ClusterState, c.Solo = tc.cluster, tc.state, tc.solo
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
