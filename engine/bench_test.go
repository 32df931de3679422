package engine

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/embedded"
)

// BenchmarkCommit measures committed keys/s of large plans against the
// embedded etcd (configured as `ccattler server` configures it), beside a
// raw loop of batched put transactions on the same etcd in the same run:
//
//   - keys/s counts the plan's writes; ops/s adds the firing records.
//
//   - raw-keys/s puts the same number of keys and values, nothing else;
//     ratio = keys/s / raw-keys/s (the median over iterations, each
//     comparing runs made side by side).
//
//   - cpu-ratio is the same comparison in CPU time of the whole process
//     (etcd runs in it), steadier than wall time on a busy machine.
//
//   - raw-same-ops/s puts exactly what the engine puts (the writes and a
//     record of the same size per firing, in transactions of the same
//     size) without compares or planning; ratio-same = ops/s / raw-same-ops/s
//     is the cost of the committer itself.
//
//     go test ./engine -run '^$' -bench Commit -benchtime 5x
func BenchmarkCommit(b *testing.B) {
	v := newEnv(b)
	ec := embedded.NewConfig()
	const keysPerPlan = 32768
	for _, w := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("writes-per-firing=%d", w), func(b *testing.B) {
			benchRun++ // keys unique across the runs of one etcd: fresh keys must be absent
			cfg := testConfig()
			cfg.MaxTxnOps = int(ec.MaxTxnOps)
			cfg.MaxTxnBytes = int(ec.MaxRequest) / 2
			e := v.engine(b, &copyEval{}, cfg)
			var engineTime, rawTime, sameTime time.Duration
			var ratios, sameRatios []float64 // per iteration: runs side by side suffer the same load
			var cpuRatios, cpuSame []float64 // raw over engine, in CPU time of the whole process (etcd included)
			// Each phase ends when the mirror has taken in its writes: the
			// watch and the mirror are part of what every write costs.
			drain := func() {
				rev, err := v.store.Revision(v.ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := v.mirror.WaitRev(v.ctx, rev); err != nil {
					b.Fatal(err)
				}
			}
			value := []byte("12345")
			for i := 0; i < b.N; i++ {
				p := eval.Plan{RuleSetVersion: "bench"}
				for f := 0; f < keysPerPlan/w; f++ {
					fr := eval.Firing{Rule: "bench", Kind: "derive", Bindings: map[string]string{"f": strconv.Itoa(f)}}
					for j := 0; j < w; j++ {
						k := facts.EffectiveInstances(fmt.Sprintf("e%d-%d-%d-%d", benchRun, i, f, j))
						fr.Reads = append(fr.Reads, eval.Read{Key: k})
						fr.Writes = append(fr.Writes, eval.Write{Key: k, Value: value})
					}
					p.Firings = append(p.Firings, fr)
				}
				drain()
				runtime.GC() // garbage of building the plan is not the phase's cost
				start, cpu := time.Now(), cpuTime()
				if err := e.apply(v.ctx, nil, &copyEval{}, p); err != nil {
					b.Fatal(err)
				}
				drain()
				took, engineCPU := time.Since(start), cpuTime()-cpu
				engineTime += took

				// The same puts as the engine's, raw: writes and records.
				var same []facts.Op
				for f, fr := range p.Firings {
					for j, wr := range fr.Writes {
						same = append(same, facts.Put(facts.EffectiveInstances(fmt.Sprintf("q%d-%d-%d-%d", benchRun, i, f, j)), wr.Value))
					}
					id, at := e.ids.Next()
					rec, _ := encodeRecord(&fr, "bench", "engine-a", at, nil)
					same = append(same, facts.Put(facts.Event(id), rec))
				}
				runtime.GC()
				start, cpu = time.Now(), cpuTime()
				for len(same) > 0 {
					n := min(len(same), cfg.MaxTxnOps/(w+1)*(w+1))
					if _, err := v.store.Commit(v.ctx, facts.Txn{Ops: same[:n], Checked: true}); err != nil {
						b.Fatal(err)
					}
					same = same[n:]
				}
				drain()
				sameTook := time.Since(start)
				cpuSame = append(cpuSame, (cpuTime()-cpu).Seconds()/engineCPU.Seconds())
				sameTime += sameTook

				runtime.GC()
				start, cpu = time.Now(), cpuTime()
				var ops []facts.Op
				flush := func() {
					if _, err := v.store.Commit(v.ctx, facts.Txn{Ops: ops, Checked: true}); err != nil {
						b.Fatal(err)
					}
					ops = ops[:0]
				}
				for f := 0; f < keysPerPlan; f++ {
					ops = append(ops, facts.Put(facts.EffectiveInstances(fmt.Sprintf("r%d-%d-%d", benchRun, i, f)), value))
					if len(ops) == cfg.MaxTxnOps {
						flush()
					}
				}
				if len(ops) > 0 {
					flush()
				}
				drain()
				rawTook, rawCPU := time.Since(start), cpuTime()-cpu
				cpuRatios = append(cpuRatios, rawCPU.Seconds()/engineCPU.Seconds())
				rawTime += rawTook
				ratios = append(ratios, rawTook.Seconds()/took.Seconds())
				sameRatios = append(sameRatios, sameTook.Seconds()/took.Seconds())
			}
			keys := float64(b.N * keysPerPlan)
			firings := float64(b.N * (keysPerPlan / w))
			b.ReportMetric(keys/engineTime.Seconds(), "keys/s")
			b.ReportMetric((keys+firings)/engineTime.Seconds(), "ops/s")
			b.ReportMetric(keys/rawTime.Seconds(), "raw-keys/s")
			b.ReportMetric(median(ratios), "ratio")
			b.ReportMetric(median(cpuRatios), "cpu-ratio")
			b.ReportMetric(median(cpuSame), "cpu-ratio-same")
			b.ReportMetric((keys+firings)/sameTime.Seconds(), "raw-same-ops/s")
			b.ReportMetric(median(sameRatios), "ratio-same")
			b.ReportMetric(float64(e.Stats().Txns)/float64(b.N), "txns/plan")
			b.ReportMetric(float64(e.Stats().Conflicts)/float64(b.N), "conflicts/plan")
		})
	}
}

var benchRun int

// cpuTime is the CPU time the process (etcd included) has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
