package faults

import (
	"context"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// endpointSample is the fewest endpoints a service was seen with, against
// its target, while a scenario ran, and how long it was short.
type endpointSample struct {
	Service string        `json:"service"`
	Target  int           `json:"target"`
	There   int           `json:"instances_on_frozen_nodes"`
	Fewest  int           `json:"fewest_endpoints"`
	At      string        `json:"at"`       // when, since the sampling began
	Phase   string        `json:"phase"`    // frozen or resumed, when it was fewest
	Short   time.Duration `json:"short_ns"` // below its target, in all
	Below   time.Duration `json:"below_target_minus_one_ns"`
	Samples int           `json:"samples"`
}

// endpointSampler lists endpoint/service/ every 100 ms and keeps, for each
// service of want, the fewest endpoints it had: over the whole run and
// since the resume.
type endpointSampler struct {
	c     *cluster
	want  map[string]int
	there map[string]int
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex // guards the fields below
	resumed bool
	whole   map[string]*endpointSample
	since   map[string]*endpointSample // since the resume
	reads   int
	errs    int
}

func (c *cluster) sampleEndpoints(want, there map[string]int) *endpointSampler {
	s := &endpointSampler{c: c, want: want, there: there, start: time.Now(),
		whole: map[string]*endpointSample{}, since: map[string]*endpointSample{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *endpointSampler) run() {
	defer close(s.done)
	prev := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fs, _, err := s.c.root.List(ctx, "endpoint/service/", 0)
		cancel()
		now := time.Now()
		s.mu.Lock()
		if err != nil {
			s.errs++
			s.mu.Unlock()
			continue
		}
		s.reads++
		have := map[string]int{}
		for _, f := range fs {
			if name, _, ok := strings.Cut(strings.TrimPrefix(f.Key, "endpoint/service/"), "/"); ok {
				have[name]++
			}
		}
		for name, target := range s.want {
			s.note(s.whole, name, target, have[name], now, now.Sub(prev))
			if s.resumed {
				s.note(s.since, name, target, have[name], now, now.Sub(prev))
			}
		}
		prev = now
		s.mu.Unlock()
	}
}

// note adds one sample of service name, n endpoints, taken gap after the
// previous one, to m.
func (s *endpointSampler) note(m map[string]*endpointSample, name string, target, n int, now time.Time, gap time.Duration) {
	phase := "frozen"
	if s.resumed {
		phase = "resumed"
	}
	e := m[name]
	if e == nil {
		e = &endpointSample{Service: name, Target: target, There: s.there[name], Fewest: n + 1}
		m[name] = e
	}
	e.Samples++
	if n < e.Fewest {
		e.Fewest, e.Phase, e.At = n, phase, now.Sub(s.start).Round(time.Millisecond).String()
	}
	if n < target {
		e.Short += gap
	}
	if n < target-1 {
		e.Below += gap
	}
}

func (s *endpointSampler) resume() {
	s.mu.Lock()
	s.resumed = true
	s.mu.Unlock()
}

// finish stops the sampling and returns what it saw, by service.
func (s *endpointSampler) finish() (whole, since []endpointSample, reads, errs int) {
	close(s.stop)
	<-s.done
	sorted := func(m map[string]*endpointSample) []endpointSample {
		var out []endpointSample
		for _, e := range m {
			out = append(out, *e)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Service < out[j].Service })
		return out
	}
	return sorted(s.whole), sorted(s.since), s.reads, s.errs
}

// TestFrozenAgentReturns freezes (SIGSTOP) an agent process holding
// instances on two nodes past its lease: its nodes become unreachable and
// their instances are replaced on the others. Then it resumes, its
// instances running still: the duplicates are stopped and the count is
// exact within 10 s of the resume, and a service that had one instance on
// the frozen nodes never has fewer than its target - 1 endpoints, sampled
// every 100 ms from the freeze until the end (one with k instances there:
// never fewer than target - k). CI: 120 instances on 12 nodes; `-long`:
// 2,900 on 20.
func TestFrozenAgentReturns(t *testing.T) {
	c := newCluster(t)
	c.startAgents(2, scale(5, 9))
	frozen := c.startAgent("frz-", 2, nil)
	nodes := 2*scale(5, 9) + 2
	c.waitNodes(nodes)
	names := map[string]int{}
	// Services large and small, so that some have exactly one instance
	// on the two frozen nodes: the scheduler spreads a service's instances
	// over distinct nodes, so a service of three on 12 nodes (`-long`: of
	// ten on 20) has exactly one there with a chance of 0.41 (0.53), and
	// none of the 12 (38) such services has one with a chance of 0.002
	// (below 1e-12).
	c.applyServices(names, "fa", scale(4, 28), scale(21, 90))
	c.applyServices(names, "fb", scale(12, 38), scale(3, 10))
	total := 0
	for _, n := range names {
		total += n
	}
	before, took := c.waitConverged(names, scale(3*time.Minute, 10*time.Minute))
	t.Logf("converged: %d instances on %d nodes in %s", len(before.runningIDs()), nodes, took.Round(time.Millisecond))

	stranded := c.placedOn("frz-")
	pl, err := c.strs("observed/instance/")
	if err != nil {
		t.Fatal(err)
	}
	there := map[string]int{}
	for id := range stranded {
		there[pl[id+"/service"]]++
	}
	singles := 0
	for _, n := range there {
		if n == 1 {
			singles++
		}
	}
	if len(stranded) == 0 || singles == 0 {
		t.Fatalf("%d instances placed on the frozen agent's nodes, of %d services alone: the scenario needs services with exactly one there (%v)", len(stranded), singles, there)
	}

	sampler := c.sampleEndpoints(names, there)
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	replaced := c.waitReplaced(names, "frz-", 2*time.Minute)

	if err := frozen.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	sampler.resume()
	// Generous, to measure how long it takes when it takes too long.
	after, exact := c.waitConverged(names, 5*time.Minute)
	time.Sleep(2 * time.Second) // what follows the convergence is sampled too
	whole, since, reads, errs := sampler.finish()

	if exact > 10*time.Second {
		t.Errorf("the count became exact %s after the agent resumed: expected within 10s", exact.Round(time.Millisecond))
	}
	if got := len(after.runningIDs()); got != total {
		t.Errorf("%d instances run, want exactly %d", got, total)
	}
	if reads == 0 {
		t.Fatalf("the endpoint sampler read nothing (%d errors)", errs)
	}
	for _, e := range whole {
		if floor := e.Target - max(e.There, 1); e.Fewest < floor {
			t.Errorf("service %s (%d of its %d instances on the frozen nodes) had %d endpoints at %s (%s): fewer than %d",
				e.Service, e.There, e.Target, e.Fewest, e.At, e.Phase, floor)
		}
	}
	// Since the resume: how far short of its target a service went, and
	// for how long, those with one instance there apart.
	var short, shortOne time.Duration
	fewest, fewestOne := 0, 0
	for _, e := range since {
		short, fewest = max(short, e.Short), min(fewest, e.Fewest-e.Target)
		if e.There == 1 {
			shortOne, fewestOne = max(shortOne, e.Short), min(fewestOne, e.Fewest-e.Target)
		}
	}
	c.allRunning()
	c.keepHistory("frozen-agent.json", map[string]any{"instances": total, "nodes": nodes, "stranded": len(stranded),
		"services_with_one_there": singles, "replaced_after_freeze": replaced.String(), "frozen_for": resumedAt.Sub(frozenAt).String(),
		"exact_after_resume": exact.String(), "samples": reads, "sample_errors": errs, "fewest": whole, "since_resume": since})
	t.Logf("%d instances on %d nodes, %d on the 2 frozen ones (%d services with exactly one there): replaced %s after the freeze; resumed after %s: exact count %s later; %d endpoint samples; since the resume: endpoints at target%+d at worst, short for at most %s (services with one there: target%+d, short for at most %s)",
		total, nodes, len(stranded), singles, replaced.Round(time.Millisecond), resumedAt.Sub(frozenAt).Round(time.Millisecond),
		exact.Round(time.Millisecond), reads, fewest, short.Round(time.Millisecond), fewestOne, shortOne.Round(time.Millisecond))
}
