package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// TestFrozenEngineLeader freezes (SIGSTOP) the server whose engine leads,
// its etcd member with it: a standby takes over and carries out a change
// made meanwhile; the frozen server, resumed, writes nothing as the leader
// it was (no firing record of its after it resumed), and nothing that ran
// stopped.
func TestFrozenEngineLeader(t *testing.T) {
	c := newCluster(t)
	c.startAgents(1, 5)
	names := map[string]int{}
	c.applyServices(names, "fr", 5, scale(20, 100))
	before, _ := c.waitConverged(names, 3*time.Minute)

	victim := c.engineLeader(30 * time.Second)
	frozenAt := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c.poll("a standby's engine leads", 60*time.Second, func() (bool, string) {
		id, err := c.electedEngine()
		return err == nil && id != "" && id != victim.id, fmt.Sprintf("elected %q (%v)", id, err)
	})
	t.Logf("%s frozen; a standby leads %s later", victim.id, time.Since(frozenAt).Round(time.Millisecond))
	c.applyServices(names, "fr", 1, scale(20, 100)+3)
	_, took := c.waitConverged(names, 2*time.Minute)
	t.Logf("a scale-up applied while %s was frozen was carried out in %s", victim.id, took.Round(time.Millisecond))

	frozenFor := scale(10*time.Second, time.Minute)
	time.Sleep(time.Until(frozenAt.Add(frozenFor)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	resumedRev, err := c.root.Revision(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	// A change after the resume: the leader's firings are recorded, and
	// a deposed one acting on its old view would be recorded too.
	c.applyServices(names, "fr", 1, scale(20, 100)+4)
	c.waitConverged(names, 2*time.Minute)
	time.Sleep(scale(5*time.Second, 30*time.Second))

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, _, err := c.root.List(ctx, "event/", 0)
	if err != nil {
		t.Fatal(err)
	}
	byLeader := map[string]int{}
	for _, rec := range evs {
		if rec.ModRevision <= resumedRev {
			continue // before the resume
		}
		var ev struct {
			Leader string `json:"leader"`
		}
		if json.Unmarshal(rec.Value, &ev) == nil {
			byLeader[ev.Leader]++
		}
		if ev.Leader == victim.id {
			t.Errorf("%s wrote %s after it resumed, deposed", victim.id, rec.Key)
		}
	}
	if len(byLeader) == 0 {
		t.Error("no firing record after the resume: the check saw nothing")
	}
	after, _ := c.waitConverged(names, time.Minute)
	for _, id := range before.runningIDs() {
		if after.states[id] != "running" || after.startedAt[id] != before.startedAt[id] {
			t.Errorf("instance %s ran before the freeze and is now %q", id, after.states[id])
		}
	}
	c.allRunning()
	t.Logf("frozen %s, resumed %s: firing records since, by writer: %v, none by %s; %d instances, every one that ran runs still",
		frozenFor, time.Since(resumedAt).Round(time.Second), byLeader, victim.id, len(after.runningIDs()))
}

// TestElectionStorm moves etcd's leadership ten times in about a minute
// (`-long`; in CI ten times as fast as the cluster settles) while the agents
// run: no live agent's lease lapses, no node is taken for gone, nothing
// that ran stops.
func TestElectionStorm(t *testing.T) {
	c := newCluster(t)
	c.startAgents(1, 5)
	names := map[string]int{}
	c.applyServices(names, "st", 5, 20)
	before, _ := c.waitConverged(names, 3*time.Minute)
	leases := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		fs, _, err := c.root.List(ctx, "lease/node/", 0)
		if err != nil {
			return -1 // unreadable during an election: not a lapse
		}
		return len(fs)
	}
	nodes := leases()
	stop := make(chan struct{})
	lapsed := make(chan string, 1)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if n := leases(); n >= 0 && n < nodes {
				select {
				case lapsed <- fmt.Sprintf("%d of %d node leases at %s", n, nodes, time.Now().Format(time.TimeOnly)):
				default:
				}
			}
		}
	}()
	start := time.Now()
	for i := range 10 {
		cur, ok := c.etcdLeader()
		for !ok {
			time.Sleep(100 * time.Millisecond)
			cur, ok = c.etcdLeader()
		}
		next := c.members[(indexOf(c.members, cur)+1)%len(c.members)]
		c.moveEtcdLeader(next)
		time.Sleep(scale(500*time.Millisecond, 5*time.Second))
		_ = i
	}
	took := time.Since(start)
	close(stop)
	select {
	case why := <-lapsed:
		t.Errorf("a live agent's lease lapsed during the elections: %s", why)
	default:
	}
	after, _ := c.waitConverged(names, time.Minute)
	for _, id := range before.runningIDs() {
		if after.states[id] != "running" || after.startedAt[id] != before.startedAt[id] {
			t.Errorf("instance %s ran before the elections and is now %q", id, after.states[id])
		}
	}
	c.allRunning()
	t.Logf("10 etcd elections in %s: %d node leases kept throughout, %d instances unchanged", took.Round(time.Millisecond), nodes, len(after.runningIDs()))
}

func indexOf(ms []*member, m *member) int {
	for i, x := range ms {
		if x == m {
			return i
		}
	}
	return 0
}
