package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/pki"
	"github.com/ccattler/ccattler/facts/spec"
)

// Each instance asks for this much; nodes offer at least twice what their
// share of the instances needs, so replacements fit after a failure.
const (
	benchCPU    = 0.1
	benchMemory = 64 << 20
)

// bench is one run: the server's parts, the simulated nodes in two agents
// (the ones the recovery phase kills run apart), and what was measured.
type bench struct {
	f   *benchFlags
	log *slog.Logger
	pr  *progress
	dir string
	res *benchResult

	store      *facts.Store // applies, knobs, reads: the engine's or, with --secure, user:admin's
	agentStore *facts.Store // the simulated nodes': with --secure, node:node-*'s
	rawStore   *facts.Store // with --secure, root's: the raw put loop writes outside the root
	mirror     *facts.Mirror
	eng        *engine.Engine
	tr         *tracker
	heap       heapSampler
	rounds     roundLog // every round the engine evaluated, for the converge's timeline

	agents  []*agent.Agent // [0] the survivors, [1] the victims
	stops   []func()       // stop each agent and wait for it
	victims map[string]bool
}

// run runs the phases in order. The server stops when it returns.
func (b *bench) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.res.GCPercent, b.res.MemoryLimitBytes = gcSettings()
	b.tr = newTracker(b.mirror)
	go b.tr.run(ctx)
	if b.f.memProfile != "" {
		b.heap.profile = b.f.memProfile + ".peak"
	}
	hctx, hstop := context.WithCancel(ctx)
	hdone := make(chan struct{})
	go func() { defer close(hdone); b.heap.run(hctx) }()
	defer func() {
		for _, stop := range b.stops {
			stop()
		}
		st := b.eng.Stats()
		b.res.EngineGaveUp, b.res.EngineFullRounds = st.GaveUp, st.FullRounds
		// A snapshot's own copy, holding only rules that missed a firing.
		b.res.EngineResyncRounds, b.res.EngineResyncFirings, b.res.EngineResyncFiringsByRule = st.ResyncRounds, st.ResyncFirings, st.ResyncFiringsByRule
		for rule, n := range st.ProblemsByRule {
			if n > 0 {
				if b.res.EngineProblems == nil {
					b.res.EngineProblems = map[string]int64{}
				}
				b.res.EngineProblems[rule] = n
			}
		}
		hstop()
		<-hdone
		b.res.PeakHeapBytes, b.res.PeakLiveHeapBytes = b.heap.peak.Load(), b.heap.peakLive.Load()
		if b.heap.err != nil {
			b.log.Error("bench: the peak heap profile", "err", b.heap.err)
		}
		b.res.PeakRSSBytes = procStatus("VmHWM")
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if rev, err := b.store.CompactRevision(cctx); err == nil {
			b.res.CompactRevision = rev
		}
	}()
	if err := b.startNodes(ctx); err != nil {
		return err
	}
	if err := b.converge(ctx); err != nil {
		return err
	}
	if b.f.memProfile != "" {
		if err := writeHeapProfile(b.f.memProfile); err != nil {
			return err
		}
	}
	b.res.ConvergedLiveHeapBytes = liveHeap()
	m := readMemory()
	b.res.ConvergedRSSAnonBytes, b.res.ConvergedRSSFileBytes = m.anon, m.file
	b.res.ConvergedStackBytes, b.res.ConvergedGoroutines = m.stacks, m.goroutines
	b.pr.phase("weighing the mirror")
	var err error
	if b.res.BytesPerFact, b.res.KVBytesPerFact, b.res.Facts, err = tableOverhead(ctx, b.mirror, b.dir); err != nil {
		return fmt.Errorf("weighing the mirror: %w", err)
	}
	// Each measuring phase starts on a collected heap. At large the
	// convergence leaves the collector a cycle over a 17 GB heap to
	// finish, and finishing it in the background was charged to whatever
	// ran next: 20,000 instead of 129,000 keys/s for the raw put loop and a
	// change p99 of 56 instead of 5 ms in one run.
	goruntime.GC()
	if err := b.raw(ctx); err != nil {
		return err
	}
	goruntime.GC()
	if err := b.changes(ctx); err != nil {
		return err
	}
	if !b.f.noRecovery {
		goruntime.GC()
		if err := b.recover(ctx); err != nil {
			return err
		}
	}
	if b.f.scaleTo >= 0 {
		goruntime.GC()
		if err := b.scaleDown(ctx); err != nil {
			return err
		}
	}
	if b.f.deleteAll {
		goruntime.GC()
		if err := b.deleteAll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// startNodes starts the simulated nodes, the victims of the recovery phase
// in an agent of their own, and waits until all are alive with a lease.
func (b *bench) startNodes(ctx context.Context) error {
	f := b.f
	sc := sim.NewConfig()
	sc.StartDelay = f.simDelay
	sc.Range = netip.MustParsePrefix("10.0.0.0/8")
	fleet, err := sim.NewFleet(sc)
	if err != nil {
		return err
	}
	perNode := float64(f.instances) / float64(f.nodes)
	nodeCPU := math.Max(4, math.Ceil(2*perNode*benchCPU))
	nodeMem := max(int64(8)<<30, int64(math.Ceil(2*perNode))*benchMemory)
	kill := max(1, int(math.Round(f.killShare*float64(f.nodes))))
	b.victims = map[string]bool{}
	var groups [2][]agent.NodeConfig
	for i := 1; i <= f.nodes; i++ {
		id := fmt.Sprintf("node-%d", i)
		g := 0
		if i > f.nodes-kill {
			g = 1
			b.victims[id] = true
		}
		groups[g] = append(groups[g], agent.NodeConfig{ID: id, CPU: nodeCPU, Memory: nodeMem,
			Architecture: goruntime.GOARCH, Zone: "zone-1", Runtime: fleet.Node(id)})
	}
	cfg := agent.NewConfig()
	cfg.Store, cfg.LeaseTTL, cfg.Log, cfg.SyncCache, cfg.MaxBatch = b.agentStore, f.leaseTTL, b.log, false, f.agentBatch
	if b.f.agentCache {
		cfg.StateDir = filepath.Join(b.dir, "agents")
	}
	for _, nodes := range groups {
		a, err := agent.New(cfg, nodes)
		if err != nil {
			return err
		}
		actx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = a.Run(actx) }()
		b.agents = append(b.agents, a)
		b.stops = append(b.stops, func() { stop(); <-done })
	}
	b.pr.phase("registering nodes", func() string {
		n := 0
		b.tr.read(func(t *tracker) { n = t.nodesUp() })
		return fmt.Sprintf("%d of %d nodes alive", n, f.nodes)
	})
	up := b.tr.when(func(t *tracker) bool { return t.nodesUp() == f.nodes })
	_, err = b.wait(ctx, up, "registering nodes")
	return err
}

// converge applies the services and waits until every instance runs, is
// healthy and has its endpoint.
func (b *bench) converge(ctx context.Context) error {
	f, res := b.f, b.res
	docs, err := benchServices(f.services, f.instances)
	if err != nil {
		return err
	}
	n := f.instances
	b.pr.phase("converging", func() string { return b.convergeStatus(n) })
	done := b.tr.when(func(t *tracker) bool {
		return len(t.endpoints) == n && t.states["pending"] == 0 && t.ready >= n
	})
	tenth := b.tr.when(func(t *tracker) bool { return t.ready >= (n+9)/10 })
	nineTenths := b.tr.when(func(t *tracker) bool { return t.ready >= n-n/10 })
	stopProfile, err := b.profilePhase("converge")
	if err != nil {
		return err
	}
	st0, ag0, tc0, cpu0, gc0 := b.eng.Stats(), b.agentStats(), b.tr.counts(), cpuTime(), gcCPUTime()
	start := time.Now()
	for _, doc := range docs {
		if _, err := spec.Apply(ctx, b.store, doc, spec.Options{Actor: "bench"}); err != nil {
			stopProfile()
			return fmt.Errorf("apply the services: %w", err)
		}
	}
	snap, err := b.wait(ctx, done, "converging")
	stopProfile()
	// The counters up to now, whether or not it converged: when it did
	// not (the large preset may not within --timeout), they and how far
	// it got are the figures that remain.
	cpu1, gc1, ag1, elapsed, stAt := cpuTime(), gcCPUTime(), b.agentStats(), time.Since(start), b.eng.Stats()
	// Memory as of convergence, before the measuring phases (weighing the
	// mirror, the raw put loop) add their own: peak RSS only grows.
	res.ConvergePeakRSSBytes, res.ConvergePeakLiveHeapBytes = procStatus("VmHWM"), b.heap.peakLive.Load()
	st1 := stAt // the engine's times as of convergence; its counts once it committed all it planned for it
	if err == nil {
		b.settleCounters()
		st1 = b.eng.Stats()
	}
	res.EngineKeysWritten, res.EngineFirings = st1.KeysWritten-st0.KeysWritten, st1.Firings-st0.Firings
	res.EngineFiringsByRule = firingsSince(st0, st1)
	res.EngineTxns, res.EngineRounds, res.Conflicts = st1.Txns-st0.Txns, st1.Rounds-st0.Rounds, st1.Conflicts-st0.Conflicts
	res.AgentOps, res.AgentTxns = ag1.Ops-ag0.Ops, ag1.Txns-ag0.Txns
	res.CPUSeconds = (cpu1 - cpu0).Seconds()
	res.GCCPUSeconds = (gc1 - gc0).Seconds()
	res.EngineWork = st1.Work.Sub(st0.Work).ByKind()
	res.EngineEvalSeconds = (stAt.EvalTime - st0.EvalTime).Seconds()
	res.EngineApplySeconds = (stAt.ApplyTime - st0.ApplyTime).Seconds()
	res.EngineApplyOverlapSeconds = (stAt.ApplyOverlapTime - st0.ApplyOverlapTime).Seconds()
	res.EngineWatchWaitSeconds = (stAt.WatchWaitTime - st0.WatchWaitTime).Seconds()
	res.EngineIdleSeconds = max(0, elapsed.Seconds()-res.EngineEvalSeconds-res.EngineApplySeconds-res.EngineWatchWaitSeconds)
	res.AgentCommitSeconds = (ag1.CommitTime - ag0.CommitTime).Seconds()
	if err != nil {
		b.tr.read(func(t *tracker) { res.ReadyAtStop, res.EndpointsAtStop = t.ready, len(t.endpoints) })
		return err
	}
	secs := snap.at.Sub(start).Seconds()
	res.ConvergeSeconds = secs
	res.InstancesPerSecond = float64(n) / secs
	res.KeysWritten, res.Transactions = snap.keys-tc0.keys, snap.revs-tc0.revs
	res.KeysPerSecond = float64(res.KeysWritten) / secs
	res.PaceFirstTenth, res.PaceLastTenth = paces(n, start, <-tenth, <-nineTenths, snap)
	res.Rounds = b.rounds.between(start, snap.at)
	var sp spread
	b.tr.read(func(t *tracker) { sp, res.Stages = t.spread(), t.stages(start) })
	res.SpreadExcessInstances, res.NodeInstancesMin, res.NodeInstancesMax, res.NodeInstancesCV = sp.Excess, sp.Min, sp.Max, sp.CV
	return nil
}

// paces are the first and the last tenth's instances/s, from when a tenth
// and nine tenths of n ran healthy (both reached once converged).
func paces(n int, start time.Time, tenth, nineTenths, done trackSnap) (first, last float64) {
	share := float64(n) / 10
	if d := tenth.at.Sub(start).Seconds(); d > 0 {
		first = share / d
	}
	if d := done.at.Sub(nineTenths.at).Seconds(); d > 0 {
		last = share / d
	}
	return first, last
}

func (b *bench) convergeStatus(n int) string {
	var s string
	b.tr.read(func(t *tracker) {
		s = fmt.Sprintf("instances %d pending, %d running+healthy of %d; endpoints %d", t.states["pending"], t.ready, n, len(t.endpoints))
	})
	st := b.eng.Stats()
	return s + fmt.Sprintf("; engine %d rounds, %d keys, %d conflicts; RSS %s", st.Rounds, st.KeysWritten, st.Conflicts, mib(procStatus("VmRSS")))
}

// agentStats adds up the agents' counters.
func (b *bench) agentStats() agent.Stats {
	var s agent.Stats
	for _, a := range b.agents {
		as := a.Stats()
		s.Txns += as.Txns
		s.Ops += as.Ops
		s.CommitTime += as.CommitTime
		s.Running += as.Running
		s.Leases += as.Leases
	}
	return s
}

// raw runs the baseline put loop against the same etcd.
func (b *bench) raw(ctx context.Context) error {
	b.pr.phase("raw etcd put loop")
	raw := b.store
	if b.rawStore != nil {
		raw = b.rawStore
	}
	rate, _, err := rawPuts(ctx, raw, b.f.rawBatch, b.f.rawFor)
	if err != nil {
		return err
	}
	b.res.RawEtcdKeysPerSecond, b.res.RawBatch = rate, b.f.rawBatch
	if rate > 0 {
		b.res.RatioToRaw = b.res.KeysPerSecond / rate
	}
	return nil
}

// changes flips one instance's health --changes times, timing each flip to
// the endpoint's deletion or return.
func (b *bench) changes(ctx context.Context) error {
	if b.f.changes == 0 {
		return nil
	}
	var id string
	b.tr.read(func(t *tracker) {
		for i := range t.endpoints {
			if in := t.inst[i]; in != nil && !b.victims[in.node] && (id == "" || i < id) {
				id = i
			}
		}
	})
	if id == "" {
		return fmt.Errorf("change phase: no instance with an endpoint on a surviving node")
	}
	key := facts.InstanceHealth(id)
	total := make([]time.Duration, 0, b.f.changes)
	engine := make([]time.Duration, 0, b.f.changes)
	write := make([]time.Duration, 0, b.f.changes)
	b.pr.phase("one-fact changes", func() string { return fmt.Sprintf("%d of %d", len(total), b.f.changes) })
	stop, err := b.profilePhase("change")
	if err != nil {
		return err
	}
	defer stop()
	st0 := b.eng.Stats()
	for i := range b.f.changes {
		healthy := i%2 == 1 // unhealthy first: the endpoint goes, then comes back
		val := "unhealthy"
		if healthy {
			val = "healthy"
		}
		raw, err := b.store.Schema.Encode(key, val)
		if err != nil {
			return err
		}
		done := b.tr.when(func(t *tracker) bool { _, ok := t.endpoints[id]; return ok == healthy })
		b.tr.watch(key)
		start := time.Now()
		// The change is a node's report: written as the nodes are.
		if _, err := b.agentStore.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put(key, raw)}}); err != nil {
			return fmt.Errorf("change phase: write %s: %w", key, err)
		}
		wrote := time.Since(start)
		snap, err := b.wait(ctx, done, fmt.Sprintf("change %d (%s = %s) reaching endpoint/service/.../%s", i+1, key, val, id))
		if err != nil {
			return err
		}
		flip := snap.at.Sub(start)
		total = append(total, flip)
		// etcd had committed the write when the endpoint it caused was
		// seen: on a loaded machine the tracker may see that before this
		// goroutine sees the commit's answer, and the wait in between is
		// not etcd's.
		write = append(write, min(wrote, flip))
		if at := b.tr.watched(); !at.IsZero() {
			engine = append(engine, snap.at.Sub(at))
		}
	}
	res := b.res
	res.Changes = len(total)
	s := sortedCopy(total)
	res.ChangeP50MS, res.ChangeP99MS, res.ChangeMaxMS = percentileMS(s, 0.5), percentileMS(s, 0.99), percentileMS(s, 1)
	e := sortedCopy(engine)
	res.ChangeEngineP50MS, res.ChangeEngineP99MS = percentileMS(e, 0.5), percentileMS(e, 0.99)
	w := sortedCopy(write)
	res.ChangeWriteP50MS, res.ChangeWriteP99MS = percentileMS(w, 0.5), percentileMS(w, 0.99)
	st1 := b.eng.Stats()
	res.ChangeEngineRounds, res.ChangeFiringsByRule = st1.Rounds-st0.Rounds, firingsSince(st0, st1)
	perFlip := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(len(total)) }
	res.ChangeEngineEvalMS = perFlip(st1.EvalTime - st0.EvalTime)
	res.ChangeEngineApplyMS = perFlip(st1.ApplyTime - st0.ApplyTime)
	res.ChangeEngineCommitMS = perFlip(st1.CommitTime - st0.CommitTime)
	res.ChangeEngineWatchWaitMS = perFlip(st1.WatchWaitTime - st0.WatchWaitTime)
	res.ChangeEngineTxns = st1.Txns - st0.Txns
	return nil
}

// recover stops the victims' agent and revokes their leases (the leases
// expire now rather than a TTL later), then times the failure policy and
// the replacements.
func (b *bench) recover(ctx context.Context) error {
	res := b.res
	var lost int
	b.tr.read(func(t *tracker) {
		for _, in := range t.inst {
			if b.victims[in.node] && in.state == "running" {
				lost++
			}
		}
	})
	res.KilledNodes, res.LostInstances = len(b.victims), lost
	b.pr.phase("killing nodes")
	b.stops[1]()
	b.stops = b.stops[:1]
	expired := b.tr.when(func(t *tracker) bool {
		for id := range b.victims {
			if t.nodes[id] == nil || t.nodes[id].lease {
				return false
			}
		}
		return true
	})
	unreachable := b.tr.when(func(t *tracker) bool {
		for id := range b.victims {
			if t.nodes[id] == nil || t.nodes[id].state != "unreachable" {
				return false
			}
		}
		return true
	})
	n := b.f.instances
	recovered := b.tr.when(func(t *tracker) bool {
		for id := range b.victims {
			if t.nodes[id] == nil || t.nodes[id].state != "unreachable" {
				return false
			}
		}
		return len(t.endpoints) == n && t.states["pending"] == 0 && t.endpointsOn(b.victims) == 0
	})
	for id := range b.victims {
		if err := b.revokeLease(ctx, id); err != nil {
			return err
		}
	}
	t0, err := b.wait(ctx, expired, "the killed nodes' leases expiring")
	if err != nil {
		return err
	}
	b.pr.phase("recovering", func() string {
		var s string
		b.tr.read(func(t *tracker) {
			s = fmt.Sprintf("endpoints %d of %d, %d on killed nodes; %d pending", len(t.endpoints), n, t.endpointsOn(b.victims), t.states["pending"])
		})
		return s
	})
	t1, err := b.wait(ctx, unreachable, "the killed nodes marked unreachable")
	if err != nil {
		return err
	}
	t2, err := b.wait(ctx, recovered, "replacements running and endpoints updated")
	if err != nil {
		return err
	}
	res.RecoverySeconds = t2.at.Sub(t0.at).Seconds()
	res.GraceSeconds = t1.at.Sub(t0.at).Seconds()
	res.RecoveryAfterGraceSeconds = t2.at.Sub(t1.at).Seconds()
	return nil
}

// revokeLease ends the lease that holds lease/node/{id}.
func (b *bench) revokeLease(ctx context.Context, id string) error {
	f, ok, err := b.store.Get(ctx, facts.Lease(id))
	if err != nil {
		return fmt.Errorf("read %s: %w", facts.Lease(id), err)
	}
	if !ok || f.Lease == 0 {
		return nil // already gone
	}
	// Revoking takes write access to the keys on the lease: the node's.
	if err := b.agentStore.Revoke(ctx, facts.LeaseID(f.Lease)); err != nil {
		return fmt.Errorf("revoke the lease of %s: %w", id, err)
	}
	return nil
}

// wait waits for a condition of the tracker, at most --timeout, and with
// --stall at most that long without progress.
func (b *bench) wait(ctx context.Context, ch <-chan trackSnap, what string) (trackSnap, error) {
	t := time.NewTimer(b.f.timeout)
	defer t.Stop()
	var stall <-chan time.Time
	if b.f.stall > 0 {
		tick := time.NewTicker(min(time.Second, b.f.stall))
		defer tick.Stop()
		stall = tick.C
	}
	start := time.Now()
	defer func() {
		if b.res.StoppedIn != "" {
			b.res.StoppedAfterSeconds = time.Since(start).Seconds()
		}
	}()
	last, lastAt := b.tr.progress(), start
	for {
		select {
		case s := <-ch:
			return s, nil
		case <-ctx.Done():
			b.res.StoppedIn = what
			return trackSnap{}, fmt.Errorf("%s: %w", what, ctx.Err())
		case now := <-stall:
			if p := b.tr.progress(); p != last {
				last, lastAt = p, now
				continue
			}
			if now.Sub(lastAt) < b.f.stall {
				continue
			}
			return trackSnap{}, b.stop(what, fmt.Sprintf("no progress for --stall %s", b.f.stall))
		case <-t.C:
			return trackSnap{}, b.stop(what, fmt.Sprintf("not done within --timeout %s", b.f.timeout))
		}
	}
}

// stop ends the phase what, saying why, where it stood and, on stderr,
// what is left (bench_stall.go).
func (b *bench) stop(what, why string) error {
	b.res.StoppedIn = what
	status := ""
	b.pr.mu.Lock()
	if b.pr.status != nil {
		status = " (" + b.pr.status() + ")"
	}
	b.pr.mu.Unlock()
	b.reportStall(what, why)
	return fmt.Errorf("%s: %s%s: %w", what, why, status, errBenchTimeout)
}

// benchServices returns the specs of services services of instances
// instances in total, in applies of at most 500 services each (one
// transaction each, well under the embedded etcd's operation limit).
func benchServices(services, instances int) ([]*spec.Doc, error) {
	var docs []*spec.Doc
	for lo := 0; lo < services; lo += 500 {
		var src strings.Builder
		for i := lo; i < min(lo+500, services); i++ {
			n := instances / services
			if i < instances%services {
				n++
			}
			fmt.Fprintf(&src, "service \"%s\" {\n  image = \"nginx:1.28\"\n  instances = %d\n  expose = [8080]\n  resources {\n    cpu = %g\n    memory = \"%dMi\"\n  }\n}\n",
				benchServiceName(i), n, benchCPU, benchMemory>>20)
		}
		doc, diags := spec.Decode(spec.Source{Name: fmt.Sprintf("bench-%d.hcl", lo/500+1), Bytes: []byte(src.String())})
		if diags.HasErrors() {
			return nil, fmt.Errorf("generated services: %s", diags.Error())
		}
		docs = append(docs, doc)
	}
	return docs, nil
}

// benchServiceName is the name of the i-th (from 0) service benchServices
// generates.
func benchServiceName(i int) string { return fmt.Sprintf("svc-%05d", i+1) }

func writeHeapProfile(path string) error {
	goruntime.GC()
	return writeProfileNow(path)
}

// writeProfileNow writes the heap profile as of the last collection.
func writeProfileNow(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--memprofile: %w", err)
	}
	return f.Close()
}

// secureStores connects as the principals a secure cluster has: user:admin
// applies the services and turns the knobs, the simulated nodes run as
// node:node-* (admitted here as `ccattler auth add` does). The raw put
// loop runs as etcd's root, which etcd does not check permissions for.
func (b *bench) secureStores(ctx context.Context, caDir string, endpoints []string) (func(), error) {
	ca, err := pki.Load(caDir)
	if err != nil {
		return nil, err
	}
	dial := func(principal string) (*facts.Store, error) {
		p, err := ca.Ensure(principal, pki.Client)
		if err != nil {
			return nil, err
		}
		tlsCfg, err := pki.ClientTLS(p.CA, p.Cert, p.Key)
		if err != nil {
			return nil, err
		}
		return facts.Dial(ctx, facts.StoreConfig{Endpoints: endpoints, Schema: facts.NewSchema(), TLS: tlsCfg, DialTimeout: 10 * time.Second})
	}
	admin, err := dial(access.Admin)
	if err != nil {
		return nil, err
	}
	fleet := "node:node-*"
	rules, err := access.Default(fleet, reload.CtlPrefix(admin.Root), engine.DefaultLeaderPrefix(admin.Root))
	if err != nil {
		return nil, err
	}
	if _, err := admin.Commit(ctx, facts.Txn{Ops: append(sim.RegisterOps().Ops, facts.Put(facts.AuthRules(fleet), rules.Encode()))}); err != nil {
		admin.Close()
		return nil, fmt.Errorf("admit %s: %w", fleet, err)
	}
	nodes, err := dial(fleet)
	if err != nil {
		admin.Close()
		return nil, err
	}
	for { // until the server has made the fleet an etcd user
		_, _, err := nodes.List(ctx, "placement/", 0)
		if err == nil {
			break
		}
		if !facts.Sleep(ctx, 100*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
	root, err := dial(access.Root)
	if err != nil {
		admin.Close()
		nodes.Close()
		return nil, err
	}
	b.store, b.agentStore, b.rawStore = admin, nodes, root
	return func() { admin.Close(); nodes.Close(); root.Close() }, nil
}
