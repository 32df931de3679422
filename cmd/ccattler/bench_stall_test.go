package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// A stalled phase's report tells the engine's part from the facts' part:
// the instances of each service by where they stand, and what a fresh
// evaluation of the live facts would fire. Here no engine runs, so the
// extras of web are left for a fresh round to stop; api, at its count,
// is not reported.
func TestStallReportNamesWhatAFreshRoundWouldDo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := etcdtest.Start(t).Store(t)
	world := map[string]any{
		facts.Node("node-1"): map[string]any{}, facts.NodeState("node-1"): "alive", facts.NodeLeased("node-1"): true,
		facts.DesiredService("web"): map[string]any{}, facts.ServiceImage("web"): "nginx:1.28", facts.ServiceInstances("web"): 1,
		facts.EffectiveInstances("web"): 1, facts.Intent("user", "web"): 1, facts.Intent("user", "api"): 1,
		facts.DesiredService("api"): map[string]any{}, facts.ServiceImage("api"): "api:2", facts.ServiceInstances("api"): 1,
		facts.EffectiveInstances("api"): 1,
	}
	for i, svc := range []string{"web", "web", "web", "api"} {
		id := fmt.Sprintf("a000%d", i)
		world[facts.InstanceService(id)], world[facts.InstanceState(id)], world[facts.InstanceHealth(id)] = svc, "running", "healthy"
		world[facts.Placement(id)], world[facts.InstanceNode(id)] = "node-1", "node-1"
	}
	for k, v := range world {
		if _, err := s.PutValue(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	m := facts.NewMirror(s, nil)
	b := &bench{f: &benchFlags{timeout: time.Second, scaleTo: 1}, store: s, mirror: m, tr: newTracker(m), pr: newProgress(new(strings.Builder)), res: &benchResult{}}
	go b.tr.run(ctx)
	mctx, stopMirror := context.WithCancel(ctx)
	mirrored := make(chan struct{})
	go func() { defer close(mirrored); _ = m.Run(mctx) }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int
		b.tr.read(func(t *tracker) { n = t.placed })
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tracker saw %d placements, want 4", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.reportStall("scale-down", "not done within --timeout 1s")
	r := b.res.Stall
	if r == nil {
		t.Fatal("no stall recorded")
	}
	if web := r.Services["web"]; web.Placed != 3 || web.PlacedReady != 3 {
		t.Errorf("web tallied %+v, want 3 placed, 3 running and healthy", web)
	}
	if n := r.FreshFirings["stop_placed_extras"]; n != 2 || !strings.Contains(strings.Join(r.FreshBindings["stop_placed_extras"], ";"), "svc=web") {
		t.Errorf("a fresh round stops %d times (%v), want twice, for web's extras; all: %v", n, r.FreshBindings["stop_placed_extras"], r.FreshFirings)
	}
	out := b.pr.w.(*strings.Builder).String()
	for _, want := range []string{"scale-down: not done within --timeout 1s", "web: 3 placed (3 running and healthy, 0 not yet)", "stop_placed_extras ×2: svc=web id="} {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "api:") {
		t.Errorf("api, at its count, is reported:\n%s", out)
	}
	if r.ProbeEvents != 0 || r.MirrorEvents == 0 && r.MirrorRelists == 0 {
		t.Errorf("a current mirror: probe %d events, mirror %d events and %d lists", r.ProbeEvents, r.MirrorEvents, r.MirrorRelists)
	}
	if len(r.FreshKeyDrift) != 0 || r.FreshKeys == 0 || !strings.Contains(out, "keys those firings read and write are the same") {
		t.Errorf("a current mirror: %d fresh keys compared, %v differ", r.FreshKeys, r.FreshKeyDrift)
	}
	// Each key compared is listed as the mirror holds it: the placements
	// the stops would delete, with their revisions.
	if len(r.FreshKeyFacts) != r.FreshKeys || !strings.Contains(out, "in the mirror, with their revisions") {
		t.Errorf("%d fresh keys compared, %d listed: %v", r.FreshKeys, len(r.FreshKeyFacts), r.FreshKeyFacts)
	}
	placements := 0
	for _, f := range r.FreshKeyFacts {
		if strings.HasPrefix(f, "placement/instance/") {
			placements++
			if !strings.Contains(f, "(revision ") || strings.Contains(f, "(revision 0)") {
				t.Errorf("a placement listed without its revision: %q", f)
			}
		}
	}
	if placements < 2 {
		t.Errorf("%d placements listed, want the two a fresh round stops: %v", placements, r.FreshKeyFacts)
	}
	if len(r.Drift) != 0 || !strings.Contains(out, "the mirror (revision ") || !strings.Contains(out, "holds what etcd") {
		t.Errorf("a current mirror is reported as drifting (%v):\n%s", r.Drift, out)
	}

	// A mirror that stopped following etcd: the report shows the writes it missed.
	stopMirror()
	<-mirrored
	if _, err := s.PutValue(ctx, facts.EffectiveInstances("api"), 2); err != nil {
		t.Fatal(err)
	}
	// web's placements written again, the same value at a new revision:
	// the keys the fresh stops read and write are compared one by one.
	for i := range 3 {
		if _, err := s.PutValue(ctx, facts.Placement(fmt.Sprintf("a000%d", i)), "node-1"); err != nil {
			t.Fatal(err)
		}
	}
	b.pr = newProgress(new(strings.Builder))
	b.reportStall("scale-down", "no progress")
	out = b.pr.w.(*strings.Builder).String()
	if p := b.res.Stall; p.ProbeEvents != 4 || !strings.HasPrefix(p.ProbeFirst, "effective/service/api/instances at revision ") {
		t.Errorf("the probe watch found %d events (%q), want the four the mirror missed", p.ProbeEvents, p.ProbeFirst)
	}
	if d := b.res.Stall.Drift; len(d) != 1 || d[0].Prefix != "effective/" || d[0].Differ != 1 {
		t.Errorf("drift %+v, want one key under effective/", d)
	}
	if want := "effective/service/api/instances: etcd 2 (revision "; !strings.Contains(out, want) || !strings.Contains(out, "mirror 1 (revision") {
		t.Errorf("the report does not name the missed write %q:\n%s", want, out)
	}
	// Each stop reads all three placements (the count it is guarded by)
	// and deletes one.
	p := b.res.Stall
	named := 0
	for _, d := range p.FreshKeyDrift {
		if strings.HasPrefix(d, "placement/instance/a000") && strings.Contains(d, `mirror "node-1" (revision `) {
			named++
		}
	}
	if named != 3 || !strings.Contains(out, `placement/instance/a0000: etcd "node-1" (revision `) {
		t.Errorf("fresh keys compared %d, differing %v; want web's three placements named:\n%s", p.FreshKeys, p.FreshKeyDrift, out)
	}

	// --stall ends a phase whose counts stay put, long before --timeout.
	b.f.timeout, b.f.stall = time.Minute, 300*time.Millisecond
	start := time.Now()
	_, err := b.wait(ctx, make(chan trackSnap), "scale-down")
	if !errors.Is(err, errBenchTimeout) || !strings.Contains(err.Error(), "scale-down: no progress for --stall 300ms") {
		t.Errorf("wait = %v, want the phase stopped for no progress", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the stalled phase ended after %s", took)
	}
	if b.res.StoppedIn != "scale-down" {
		t.Errorf("stopped_in = %q", b.res.StoppedIn)
	}

	// Progress puts it off: while a count moves every 20 ms for 1.5 s, a
	// --stall of 500 ms does not end the phase.
	b.res.StoppedIn = ""
	b.f.stall = 500 * time.Millisecond
	moving := 1500 * time.Millisecond
	start = time.Now()
	go func() {
		for time.Since(start) < moving {
			b.tr.read(func(t *tracker) { t.ready++ })
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if _, err := b.wait(ctx, make(chan trackSnap), "scale-down"); !errors.Is(err, errBenchTimeout) {
		t.Errorf("wait = %v, want the phase stopped once the count stops", err)
	}
	if took := time.Since(start); took < moving {
		t.Errorf("the phase ended after %s, while its count still moved", took)
	}
}
