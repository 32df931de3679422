package engine

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// Writers change desired counts while the engine derives effective ones.
// In the end every effective count equals its desired count, and every
// effective key the engine wrote carries a firing record at its very
// revision with its very value: no write is lost, none is unexplained.
func TestConcurrentWritersConverge(t *testing.T) { eachCommitMode(t, testConcurrentWritersConverge) }

func testConcurrentWritersConverge(t *testing.T, cfg Config) {
	v := newEnv(t)
	cfg.MaxTxnOps = 16 // many small transactions: more chances to interleave
	e := v.engine(t, &copyEval{version: "v1"}, cfg)
	v.run(t, e)

	const services, writers, writes = 12, 3, 40
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; i < writes; i++ {
				name := fmt.Sprintf("s%d", rng.IntN(services))
				var err error
				if rng.IntN(8) == 0 {
					_, err = v.store.Commit(v.ctx, facts.Txn{Ops: []facts.Op{facts.Delete(facts.ServiceInstances(name))}})
				} else {
					_, err = v.store.Commit(v.ctx, facts.Txn{Ops: []facts.Op{
						facts.Put(facts.ServiceInstances(name), []byte(strconv.Itoa(rng.IntN(100))))}})
				}
				if err != nil {
					t.Error(err)
					return
				}
				if rng.IntN(4) == 0 { // and sometimes someone scribbles on the derived key
					v.store.Commit(v.ctx, facts.Txn{Ops: []facts.Op{facts.Put(facts.EffectiveInstances(name), []byte("999"))}})
				}
			}
		}(w)
	}
	wg.Wait()
	settle(t, v, e)

	state := snapshotFacts(t, v)
	for i := 0; i < services; i++ {
		name := fmt.Sprintf("s%d", i)
		d, dok := state[facts.ServiceInstances(name)]
		f, eok := v.get(t, facts.EffectiveInstances(name))
		if dok != eok || (dok && string(d) != string(f.Value)) {
			t.Errorf("%s: desired %s (%v), effective %s (%v)", name, d, dok, f.Value, eok)
		}
	}
	byRev := map[int64][]event{}
	for _, ev := range v.events(t) {
		byRev[ev.Rev] = append(byRev[ev.Rev], ev)
	}
	for i := 0; i < services; i++ {
		f, ok := v.get(t, facts.EffectiveInstances(fmt.Sprintf("s%d", i)))
		if !ok {
			continue
		}
		explained := false
		for _, ev := range byRev[f.ModRevision] {
			for _, w := range ev.Writes {
				explained = explained || (w.Key == f.Key && string(w.Value) == string(f.Value))
			}
		}
		if !explained {
			t.Errorf("%s = %s at %d: no firing record at that revision writes it", f.Key, f.Value, f.ModRevision)
		}
	}
	t.Logf("stats: %d txns, %d conflicts, %d re-evaluated", e.Stats().Txns, e.Stats().Conflicts, e.Stats().Reevaluated)
}
