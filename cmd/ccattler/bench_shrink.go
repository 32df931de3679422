package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
)

// The removal phases: work proportional to the change also when the change
// takes most of the cluster away. scale-down sets every service's count to
// --scale-to as `ccattler scale` does; delete removes every service as
// `ccattler delete service` does. Each is timed from its commit to the
// state the lifecycle policies promise: exactly the count asked for
// running, every other instance's placement deleted and its stop noted
// (gc's note_stopped; collect_stopped deletes those facts an hour later,
// which the bench does not wait for).

// shrinkResult is what one removal phase measured.
type shrinkResult struct {
	Seconds float64 `json:"seconds"` // commit to the promised state
	Stopped int     `json:"stopped"` // instances newly stopped
	// The most transactions one service's stops went in: 1 when each
	// service's stops were one commit (the engine commits each service's
	// guarded stops apart, so that a conflict on one count fails no other).
	StopTransactions int              `json:"stop_transactions"`
	EngineRounds     int64            `json:"engine_rounds"`
	EngineFirings    int64            `json:"engine_firings"`
	FiringsByRule    map[string]int64 `json:"firings_by_rule"`
	CPUSeconds       float64          `json:"cpu_seconds"`
	// The engine's time, as in the converge phase's figures.
	EngineEvalSeconds      float64 `json:"engine_evaluate_seconds"`
	EngineApplySeconds     float64 `json:"engine_apply_seconds"`
	EngineWatchWaitSeconds float64 `json:"engine_watch_wait_seconds"`
}

// scaleDown scales every service to --scale-to and waits until exactly
// that many of each run and every other is stopped without a placement.
func (b *bench) scaleDown(ctx context.Context) error {
	n := b.f.scaleTo
	want := n * b.f.services
	b.pr.phase("scaling down", func() string { return b.shrinkStatus(want) })
	done := b.tr.when(func(t *tracker) bool { return t.shrunk(b.f.services, n) })
	r, err := b.shrink(ctx, done, "scale-down", func() error {
		count := []byte(strconv.Itoa(n))
		for i := range b.f.services {
			name := benchServiceName(i)
			cur, err := spec.Current(ctx, b.store, name)
			if err != nil {
				return err
			}
			cur[facts.ServiceInstances(name)], cur[facts.Intent("user", name)] = count, count
			if _, err := spec.Set(ctx, b.store, name, cur, spec.Options{Actor: "bench"}); err != nil {
				return fmt.Errorf("scale service %s %d: %w", name, n, err)
			}
		}
		return nil
	})
	b.res.ScaleDown = r
	return err
}

// deleteAll deletes every service and waits until none of their instances
// has a placement, an endpoint or a pending state, each stop noted.
func (b *bench) deleteAll(ctx context.Context) error {
	b.pr.phase("deleting", func() string { return b.shrinkStatus(0) })
	done := b.tr.when(func(t *tracker) bool { return t.shrunk(0, 0) })
	r, err := b.shrink(ctx, done, "delete", func() error {
		for i := range b.f.services {
			name := benchServiceName(i)
			if _, err := spec.Delete(ctx, b.store, spec.KindService, name, spec.Options{Actor: "bench"}); err != nil {
				return fmt.Errorf("delete service %s: %w", name, err)
			}
		}
		return nil
	})
	b.res.Delete = r
	return err
}

// profilePhases are the phases --cpuprofile-phase may name.
var profilePhases = []string{"converge", "change", "scale-down", "delete"}

// profilePhase starts the CPU profile when --cpuprofile-phase names phase;
// stop ends it.
func (b *bench) profilePhase(phase string) (stop func(), err error) {
	if b.f.profilePhase != phase {
		return func() {}, nil
	}
	pf, err := os.Create(b.f.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}

// settleCounters waits, at most 10 s, until the engine has evaluated and
// committed everything the tracker saw: it counts a firing once its commit
// returns, which may be after the watch delivered its writes, so counters
// read at once may miss the last plan's.
func (b *bench) settleCounters() {
	var seen int64
	b.tr.read(func(t *tracker) { seen = t.lastRev })
	for deadline := time.Now().Add(10 * time.Second); b.eng.Stats().SettledRev < seen && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// shrink runs change and waits for done, counting what went on meanwhile
// (and profiling it, with --cpuprofile-phase naming the phase).
func (b *bench) shrink(ctx context.Context, done <-chan trackSnap, what string, change func() error) (*shrinkResult, error) {
	stop, err := b.profilePhase(what)
	if err != nil {
		return nil, err
	}
	defer stop()
	var stopped0 int
	b.tr.read(func(t *tracker) { stopped0, t.unplaced = t.states["stopped"], map[string]map[int64]bool{} })
	st0, cpu0 := b.eng.Stats(), cpuTime()
	start := time.Now()
	if err := change(); err != nil {
		return nil, err
	}
	snap, err := b.wait(ctx, done, what)
	cpu1 := cpuTime()
	if err == nil {
		b.settleCounters()
	}
	st1 := b.eng.Stats()
	r := &shrinkResult{EngineRounds: st1.Rounds - st0.Rounds, EngineFirings: st1.Firings - st0.Firings,
		FiringsByRule: firingsSince(st0, st1), CPUSeconds: (cpu1 - cpu0).Seconds(),
		EngineEvalSeconds:      (st1.EvalTime - st0.EvalTime).Seconds(),
		EngineApplySeconds:     (st1.ApplyTime - st0.ApplyTime).Seconds(),
		EngineWatchWaitSeconds: (st1.WatchWaitTime - st0.WatchWaitTime).Seconds()}
	b.tr.read(func(t *tracker) {
		r.Stopped = t.states["stopped"] - stopped0
		for _, revs := range t.unplaced {
			r.StopTransactions = max(r.StopTransactions, len(revs))
		}
	})
	if err != nil {
		return r, err
	}
	r.Seconds = snap.at.Sub(start).Seconds()
	return r, nil
}

// firingsSince is the firings by rule between two snapshots of the
// engine's counters.
func firingsSince(st0, st1 engine.Stats) map[string]int64 {
	out := map[string]int64{}
	for rule, n := range st1.FiringsByRule {
		if d := n - st0.FiringsByRule[rule]; d > 0 {
			out[rule] = d
		}
	}
	return out
}

func (b *bench) shrinkStatus(want int) string {
	var s string
	b.tr.read(func(t *tracker) {
		s = fmt.Sprintf("%d placed (want %d), %d stopped, %d stops noted, %d pending, endpoints %d",
			t.placed, want, t.states["stopped"], t.stoppedAt, t.states["pending"], len(t.endpoints))
	})
	st := b.eng.Stats()
	return s + fmt.Sprintf("; engine %d rounds", st.Rounds)
}

// shrunk says whether each of services services runs exactly n placed
// instances, each running, healthy and with its endpoint, and every other
// instance is stopped without a placement, its stop noted.
func (t *tracker) shrunk(services, n int) bool {
	running := map[string]int{}
	for id, in := range t.inst {
		switch {
		case in.node != "":
			if !in.ready() {
				return false
			}
			if _, ok := t.endpoints[id]; !ok {
				return false
			}
			running[in.service]++
		case in.state == "" && !in.stoppedAt:
			// facts gone (collected) or not yet written: nothing left to stop
		case in.state != "stopped" && in.state != "failed", !in.stoppedAt:
			return false
		}
	}
	if n > 0 && len(running) != services {
		return false
	}
	for _, c := range running {
		if c != n {
			return false
		}
	}
	return len(t.endpoints) == t.placed
}
