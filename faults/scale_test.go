package faults

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
)

// engineCounter reads one of m's engine counters from its /metrics
// (withAdmin), e.g. "ccattler_engine_full_rounds_total".
func (c *cluster) engineCounter(m *member, name string) (float64, error) {
	lines, err := c.metrics(m)
	if err != nil {
		return 0, err
	}
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s in its /metrics", m.id, name)
}

// metrics returns the lines of m's /metrics (withAdmin).
func (c *cluster) metrics(m *member) ([]string, error) {
	if m.admin == "" {
		c.t.Fatalf("server %s serves no /metrics: start the cluster withAdmin()", m.id)
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + m.admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// fullRounds is how many full evaluations every server's engine has made:
// one that is not leading makes none.
func (c *cluster) fullRounds() map[string]float64 {
	c.t.Helper()
	out := map[string]float64{}
	for _, m := range c.members {
		n, err := c.engineCounter(m, "ccattler_engine_full_rounds_total")
		if err != nil {
			c.t.Fatalf("full rounds of %s: %v", m.id, err)
		}
		out[m.id] = n
	}
	return out
}

// resyncs returns every server's engine's resyncs at rest, and the
// firings they found that its incremental rounds had missed, by server and
// rule: a correct engine's are none.
func (c *cluster) resyncs() (rounds map[string]float64, missed []string) {
	c.t.Helper()
	rounds = map[string]float64{}
	for _, m := range c.members {
		lines, err := c.metrics(m)
		if err != nil {
			c.t.Fatalf("metrics of %s: %v", m.id, err)
		}
		for _, l := range lines {
			if v, ok := strings.CutPrefix(l, "ccattler_engine_resync_rounds_total "); ok {
				if rounds[m.id], err = strconv.ParseFloat(v, 64); err != nil {
					c.t.Fatalf("resyncs of %s: %v", m.id, err)
				}
			}
			if strings.HasPrefix(l, "ccattler_engine_resync_firings_total{") {
				missed = append(missed, m.id+": "+l)
			}
		}
	}
	return rounds, missed
}

// problemsLogged are the lines of every server's log that report a rule
// not evaluated in a round (engine.noteProblems).
func (c *cluster) problemsLogged() []string {
	var out []string
	for _, m := range c.members {
		for _, l := range strings.Split(m.logText(), "\n") {
			if strings.Contains(l, "rule not evaluated") {
				out = append(out, m.id+": "+l)
			}
		}
	}
	return out
}

// scaleChange is one change of the churn: a service set to a count.
type scaleChange struct {
	At      string `json:"at"` // since the churn began
	Service string `json:"service"`
	To      int    `json:"to"`
	Err     string `json:"err,omitempty"`
}

// TestRapidScale changes the instance counts of several services every
// 200 ms (3→8→2→6…) for 10 s (`-long`: a minute) and then leaves them:
// once the counts are exact, every running instance has its endpoint and no
// endpoint is left for one that is not running within 5 s; the engine made
// no full evaluation meanwhile (every change was carried out incrementally),
// no server logged a rule not evaluated, and the leader's resyncs at rest
// (every 2 s) found nothing the incremental rounds had missed.
func TestRapidScale(t *testing.T) {
	c := newCluster(t, withAdmin(), withResync(2*time.Second))
	c.startAgents(2, scale(5, 10))
	services := scale(4, 8)
	names := map[string]int{}
	c.applyServices(names, "rs", services, 3)
	c.waitConverged(names, 2*time.Minute)
	leader := c.engineLeader(30 * time.Second)
	fullBefore := c.fullRounds()
	if problems := c.problemsLogged(); len(problems) > 0 {
		t.Fatalf("rules not evaluated before the churn:\n%s", strings.Join(problems, "\n"))
	}

	counts := []int{3, 8, 2, 6, 1, 7, 0, 5, 9, 4}
	churn := scale(10*time.Second, time.Minute)
	var mu sync.Mutex
	var history []scaleChange
	last := map[string]int{} // service -> the count it was set to last
	start := time.Now()
	var wg sync.WaitGroup
	for i := range services {
		name := fmt.Sprintf("rs-%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for k := i; time.Since(start) < churn; k++ { // each service its own phase
				n := counts[k%len(counts)]
				err := setCount(c.root, name, n)
				ch := scaleChange{At: time.Since(start).Round(time.Millisecond).String(), Service: name, To: n}
				mu.Lock()
				if err != nil {
					ch.Err = err.Error()
				} else {
					last[name] = n
				}
				history = append(history, ch)
				mu.Unlock()
				<-tick.C
			}
		}()
	}
	wg.Wait()
	stopped := time.Now()
	want := last // the churn is over: nothing writes it any more
	failed := 0
	for _, ch := range history {
		if ch.Err != "" {
			failed++
		}
	}
	c.keepHistory("scale-changes.json", history)
	t.Logf("%d scale changes over %d services in %s (%d failed), last counts %v", len(history), services, stopped.Sub(start).Round(time.Millisecond), failed, want)
	if failed > 0 {
		t.Errorf("%d of %d scale changes failed; see scale-changes.json", failed, len(history))
	}

	// Settled: every service runs exactly what it was set to last.
	var w *world
	settled := c.poll("every service at its last count", 2*time.Minute, func() (bool, string) {
		var err error
		if w, err = c.world(); err != nil {
			return false, err.Error()
		}
		for s, n := range want {
			if w.target[s] != n || len(w.running[s]) != n {
				return false, fmt.Sprintf("service %s: effective %d, %d running, set to %d", s, w.target[s], len(w.running[s]), n)
			}
		}
		return true, ""
	})
	settledAt := time.Now()
	var why string
	endpoints := time.Duration(-1)
	for deadline := time.Now().Add(5 * time.Second); ; {
		var err error
		if w, err = c.world(); err != nil {
			why = err.Error()
		} else {
			var ok bool
			if ok, why = w.converged(want); ok {
				endpoints = time.Since(settledAt)
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if endpoints < 0 {
		t.Errorf("endpoints not right within 5s of the counts being exact: %s", why)
		c.keepHistory("rapid-scale-endpoints.json", c.instanceFacts(w, want))
	}

	if now := c.engineLeader(30 * time.Second); now != leader {
		t.Errorf("the engine's leadership moved from %s to %s during the churn: no fault was injected", leader.id, now.id)
	}
	fullAfter := c.fullRounds()
	for id, n := range fullAfter {
		if n != fullBefore[id] {
			t.Errorf("server %s made %v full evaluations during the churn: every change should be evaluated incrementally", id, n-fullBefore[id])
		}
	}
	if problems := c.problemsLogged(); len(problems) > 0 {
		t.Errorf("%d rules not evaluated during the churn:\n%s", len(problems), strings.Join(problems[:min(len(problems), 20)], "\n"))
	}
	// Resyncs at rest, every 2 s, found nothing the incremental rounds had missed.
	time.Sleep(3 * time.Second) // at rest now: at least one more resync
	resyncs, missed := c.resyncs()
	if resyncs[leader.id] < 1 || len(missed) > 0 {
		t.Errorf("resyncs at rest %v; firings they found missed (want none):\n%s", resyncs, strings.Join(missed, "\n"))
	}
	t.Logf("resyncs at rest by server: %v, none found anything missed", resyncs)
	c.allRunning()
	rounds, _ := c.engineCounter(leader, "ccattler_engine_rounds_total")
	c.keepHistory("rapid-scale.json", map[string]any{"changes": len(history), "services": services, "churn": stopped.Sub(start).String(),
		"counts_exact_after": settled.String(), "endpoints_right_after_exact": endpoints.String(), "full_rounds_before": fullBefore,
		"full_rounds_after": fullAfter, "leader": leader.id, "leader_rounds": rounds})
	t.Logf("counts exact %s after the last change, endpoints right %s after that; full evaluations by %s: %v before, %v after; %v rounds in all; no rule left unevaluated",
		settled.Round(time.Millisecond), endpoints.Round(time.Millisecond), leader.id, fullBefore[leader.id], fullAfter[leader.id], rounds)
}

// setCount sets a service's instance count as `ccattler scale service`
// does: desired/ and the user's intent in one transaction.
func setCount(s *facts.Store, name string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	want, err := spec.Current(ctx, s, name)
	if err != nil {
		return err
	}
	if want == nil {
		return fmt.Errorf("no service %s", name)
	}
	count := []byte(strconv.Itoa(n))
	want[facts.ServiceInstances(name)], want[facts.Intent("user", name)] = count, count
	_, err = spec.Set(ctx, s, name, want, spec.Options{})
	return err
}

// instanceFacts are, for every running instance of services without its
// endpoint and every endpoint without its running instance, the facts the
// endpoint rule reads: what a failing run keeps to say why.
func (c *cluster) instanceFacts(w *world, services map[string]int) map[string]map[string]string {
	out := map[string]map[string]string{}
	add := func(id string) {
		f := map[string]string{}
		for _, prefix := range []string{"observed/instance/" + id + "/", "placement/instance/" + id} {
			kv, err := c.strs(prefix)
			if err != nil {
				f["error"] = err.Error()
				continue
			}
			for k, v := range kv {
				f[prefix+k] = v
			}
		}
		if node := f["placement/instance/"+id]; node != "" {
			kv, _ := c.strs("observed/node/" + node + "/")
			for k, v := range kv {
				f["observed/node/"+node+"/"+k] = v
			}
		}
		// The firing records that name it: what the engine last did about it.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		evs, _, err := c.root.List(ctx, "event/", 0)
		if err == nil {
			n := 0
			for i := len(evs) - 1; i >= 0 && n < 20; i-- {
				if strings.Contains(string(evs[i].Value), id) {
					f[evs[i].Key] = string(evs[i].Value)
					n++
				}
			}
		}
		out[id] = f
	}
	for s := range services {
		for id := range w.running[s] {
			if !w.endpoints[s][id] {
				add(id)
			}
		}
		for id := range w.endpoints[s] {
			if w.running[s][id] == 0 {
				add(id)
			}
		}
	}
	return out
}
