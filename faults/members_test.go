package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestReplaceDeadServer loses a server for good and replaces it the way
// docs/operations.md says: cluster member remove, cluster member add, the
// new server started with the flags add printed. The cluster then survives
// losing another of the original servers: the new member counts in the
// quorum. A snapshot taken at the end holds the keyspace.
func TestReplaceDeadServer(t *testing.T) {
	c := newCluster(t)
	c.startAgents(1, 4)
	names := map[string]int{}
	c.applyServices(names, "rp", 3, 10)
	before, _ := c.waitConverged(names, 2*time.Minute)

	dead := c.members[2]
	dead.kill()
	c.must("cluster", "member", "remove", dead.id)
	ports := [2]int{etcdtest.FreePort(t), etcdtest.FreePort(t)}
	peer := fmt.Sprintf("https://127.0.0.1:%d", ports[1])
	out := c.must("cluster", "member", "add", "s4", "--peer", peer)
	ic := regexp.MustCompile(`--initial-cluster (\S+) --initial-cluster-state existing`).FindStringSubmatch(out)
	if ic == nil {
		t.Fatalf("cluster member add printed no --initial-cluster:\n%s", out)
	}
	if strings.Contains(ic[1], dead.id+"=") || !strings.Contains(ic[1], "s4="+peer) {
		t.Fatalf("cluster member add: --initial-cluster %s: expected s1, s2 and s4, without %s", ic[1], dead.id)
	}
	s4 := c.newMember("s4", ports, ic[1], "existing")
	c.members[2] = s4 // clients now reach s1, s2, s4
	c.restart(s4)

	var ms []struct {
		Name    string   `json:"name"`
		Clients []string `json:"client_urls"`
	}
	if err := json.Unmarshal([]byte(c.must("cluster", "members", "-o", "json")), &ms); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name)
	}
	if !slices.Equal(got, []string{"s1", "s2", "s4"}) {
		t.Fatalf("cluster members: %v, want [s1 s2 s4]", got)
	}

	// Without s1 the quorum is s2 and s4: a change is carried out.
	c.members[0].kill()
	c.applyServices(names, "rp", 1, 12)
	after, took := c.waitConverged(names, 2*time.Minute)
	t.Logf("%s replaced by s4; with s1 down too, a scale-up was carried out in %s", dead.id, took.Round(time.Millisecond))
	for _, id := range before.runningIDs() {
		if after.states[id] != "running" {
			t.Errorf("instance %s ran before and is now %q", id, after.states[id])
		}
	}

	snap := filepath.Join(c.dir, "backup.db")
	c.must("cluster", "snapshot", "save", snap)
	st, err := os.Stat(snap)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 4096 {
		t.Fatalf("snapshot %s: %d bytes: too small to hold the keyspace", snap, st.Size())
	}
	t.Logf("snapshot of %d bytes", st.Size())
}

// Every server of a cluster stopped in turn, as for maintenance, stops
// promptly with agents connected, the last one too, although its etcd has
// no quorum left: it cuts its clients' streams after a second, and skips
// the resignation and the status lease it cannot write. Before, each
// stop waited 7s for the streams, and the last one 5s more for the lease.
func TestEveryServerStopsPromptly(t *testing.T) {
	c := newCluster(t)
	c.startAgents(1, 3)
	names := map[string]int{}
	c.applyServices(names, "st", 1, 3)
	c.waitConverged(names, 2*time.Minute)
	for i, m := range c.members {
		start := time.Now()
		m.stop()
		took := time.Since(start)
		t.Logf("%s (%d of %d) stopped in %s", m.id, i+1, len(c.members), took.Round(time.Millisecond))
		if !strings.Contains(m.logText(), `msg="server stopped"`) {
			t.Errorf("%s did not stop gracefully:\n%s", m.id, m.logText())
		}
		if took > 4*time.Second {
			t.Errorf("%s took %s to stop, want under 4s:\n%s", m.id, took, m.logText())
		}
	}
}
