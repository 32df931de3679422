package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// TestKillBothLeaders kills -9 the server that is both etcd's leader and
// the engine's: the survivors elect a leader and an engine within seconds,
// the engine then acts again (a scale-up it had not seen is carried out),
// and every instance that ran before runs still, under the same id.
func TestKillBothLeaders(t *testing.T) {
	c := newCluster(t)
	services, per := scale(10, 20), scale(30, 50) // 300 or 1,000 instances
	c.startAgents(2, scale(5, 10))
	names := map[string]int{}
	c.applyServices(names, "web", services, per)
	before, took := c.waitConverged(names, scale(3*time.Minute, 5*time.Minute))
	t.Logf("converged: %d instances over %d nodes in %s", len(before.runningIDs()), 2*scale(5, 10), took.Round(time.Millisecond))

	victim := c.engineLeader(30 * time.Second)
	c.moveEtcdLeader(victim)
	killed := time.Now()
	victim.kill()
	t.Logf("killed %s (etcd leader and engine leader)", victim.id)

	var etcdElected, engineElected time.Duration
	c.poll("the survivors elect an etcd leader", 30*time.Second, func() (bool, string) {
		m, ok := c.etcdLeader()
		if ok && m != victim {
			etcdElected = time.Since(killed)
			return true, ""
		}
		return false, "no leader yet"
	})
	var termRev int64
	c.poll("a survivor's engine leads", 30*time.Second, func() (bool, string) {
		id, rev, err := c.engineTerm()
		if err == nil && id != "" && id != victim.id {
			engineElected, termRev = time.Since(killed), rev
			return true, ""
		}
		return false, fmt.Sprintf("elected %q (%v)", id, err)
	})
	// The new leader writes: its clock ticks (it starts with the term,
	// beside the first round), guarded by an election key made after the
	// kill, so no write of the victim's can pass for it.
	var engineWrote time.Duration
	c.poll("the new engine writes", 30*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		f, ok, err := c.root.Get(ctx, facts.Clock())
		if err == nil && ok && f.ModRevision > termRev {
			engineWrote = time.Since(killed)
			return true, ""
		}
		return false, fmt.Sprintf("clock at revision %d, the term began at %d (%v)", f.ModRevision, termRev, err)
	})
	t.Logf("etcd leader elected %s after the kill; engine leading %s after the kill (%s after etcd's election), writing %s after etcd's election",
		etcdElected.Round(time.Millisecond), engineElected.Round(time.Millisecond), (engineElected - etcdElected).Round(time.Millisecond),
		(engineWrote - etcdElected).Round(time.Millisecond))
	if engineWrote-etcdElected > 5*time.Second {
		t.Errorf("the engine resumed (wrote) %s after etcd's election: expected within 5s", (engineWrote - etcdElected).Round(time.Millisecond))
	}

	// The new engine acts: one service scaled up is carried out, and
	// nothing that ran stopped.
	c.applyServices(names, "web", 1, per+5)
	after, took := c.waitConverged(names, 2*time.Minute)
	t.Logf("scale-up of web-0 carried out %s after the kill (%s after it was applied)", time.Since(killed).Round(time.Millisecond), took.Round(time.Millisecond))
	want := services*per + 5
	if got := len(after.runningIDs()); got != want {
		t.Errorf("%d instances run, want exactly %d", got, want)
	}
	for _, id := range before.runningIDs() {
		if after.states[id] != "running" || after.startedAt[id] != before.startedAt[id] {
			t.Errorf("instance %s ran before the kill and is now %q (started %s, before %s)", id, after.states[id], after.startedAt[id], before.startedAt[id])
		}
	}
	c.restart(victim)
	c.waitConverged(names, time.Minute)
	c.allRunning()
}

// TestQuorumLoss kills 2 of the 3 servers: the agents keep every instance,
// `ccattler apply` fails within its --timeout naming the endpoints, and
// once the two are back the cluster converges with the same instance ids.
func TestQuorumLoss(t *testing.T) {
	c := newCluster(t)
	c.startAgents(2, scale(5, 10))
	names := map[string]int{}
	c.applyServices(names, "api", scale(5, 20), scale(20, 50))
	before, _ := c.waitConverged(names, 3*time.Minute)
	ids := before.runningIDs()
	t.Logf("converged: %d instances", len(ids))

	lost := c.members[:2]
	for _, m := range lost {
		m.kill()
	}
	downFor := scale(20*time.Second, 3*time.Minute) // past the agents' 10s lease TTL
	lostAt := time.Now()
	r := c.client("--timeout", "3s", "apply", "-f", c.dir+"/api.hcl")
	t.Logf("apply without quorum: exit %d after %s: %s", r.code, r.took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
	if r.code != 1 {
		t.Errorf("apply without quorum: exit %d, want 1\n%s", r.code, r.stderr)
	}
	if r.took > 3*time.Second+5*time.Second {
		t.Errorf("apply without quorum took %s: expected to fail within its --timeout 3s (plus start-up)", r.took)
	}
	if !strings.Contains(r.stderr, c.members[2].client) || !strings.Contains(r.stderr, "quorum") {
		t.Errorf("apply without quorum: the error names neither the endpoints nor the cause:\n%s", r.stderr)
	}
	g := c.client("--timeout", "3s", "get", "services")
	if g.code != 1 {
		t.Errorf("get without quorum: exit %d, want 1\n%s", g.code, g.stderr)
	}
	for _, a := range c.agents {
		if !a.running() {
			t.Errorf("agent %s exited while the cluster had no quorum:\n%s", a.name, tail(a.logText()))
		}
	}
	time.Sleep(time.Until(lostAt.Add(downFor)))
	back := time.Now()
	// The survivor retries what fails without a quorum with pauses that
	// grow: a few warnings for the whole outage, not several a second.
	warns := warnings(c.members[2], lostAt, back)
	total := 0
	for _, n := range warns {
		total += n
	}
	t.Logf("the surviving server logged %d warnings in the %s without quorum: %v", total, back.Sub(lostAt).Round(time.Second), warns)
	if perMin := float64(total) / back.Sub(lostAt).Minutes(); perMin > 60 {
		t.Errorf("the surviving server logged %d warnings in %s without quorum (%.0f a minute): retries that do not back off", total, back.Sub(lostAt).Round(time.Second), perMin)
	}
	c.restart(lost...) // together: neither has a quorum alone
	after, took := c.waitConverged(names, 2*time.Minute)
	t.Logf("quorum lost for %s; converged %s after the servers were started again", back.Sub(lostAt).Round(time.Second), took.Round(time.Millisecond))
	if got := after.runningIDs(); !slices.Equal(got, ids) {
		t.Errorf("after the quorum came back %d instances run, %d before; the ids differ", len(got), len(ids))
	}
	for _, id := range ids {
		if after.startedAt[id] != before.startedAt[id] {
			t.Errorf("instance %s was started again (%s, before %s)", id, after.startedAt[id], before.startedAt[id])
		}
	}
	c.allRunning()
}

// TestAllServersRestarted kills -9 every server at once and starts them
// again: the cluster comes back from its data directories alone, and the
// instances are the same ones, never started again.
func TestAllServersRestarted(t *testing.T) {
	c := newCluster(t)
	c.startAgents(scale(1, 2), scale(5, 10))
	names := map[string]int{}
	c.applyServices(names, "all", scale(5, 20), scale(20, 50)) // 100 or 1,000 instances
	before, _ := c.waitConverged(names, 3*time.Minute)
	for _, m := range c.members {
		m.kill()
	}
	time.Sleep(scale(2*time.Second, 30*time.Second))
	back := time.Now()
	c.restart(c.members...)
	c.redial()
	after, took := c.waitConverged(names, 2*time.Minute)
	t.Logf("every server killed and started again: converged %s after the start (%s after they were ready)",
		time.Since(back).Round(time.Millisecond), took.Round(time.Millisecond))
	// Past the agents' lease TTL (10s): a lease the outage let lapse
	// would have made its node gone and its instances replaced by now.
	time.Sleep(12 * time.Second)
	after, _ = c.waitConverged(names, time.Minute)
	if got, want := after.runningIDs(), before.runningIDs(); !slices.Equal(got, want) {
		t.Errorf("after the restart %d instances run, %d before; the ids differ", len(got), len(want))
	}
	for _, id := range before.runningIDs() {
		if after.startedAt[id] != before.startedAt[id] {
			t.Errorf("instance %s was started again", id)
		}
	}
	c.allRunning()
}

// warnings counts the warnings m logged from since to until, by message.
func warnings(m *member, since, until time.Time) map[string]int {
	out := map[string]int{}
	for _, l := range m.logLines(since, until) {
		if l.level == "WARN" {
			out[l.msg]++
		}
	}
	return out
}
