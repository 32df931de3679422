package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// nullEval plans nothing: firings dropped as stale stay dropped.
type nullEval struct{}

func (nullEval) Full(facts.Reader) eval.Plan                                  { return eval.Plan{} }
func (nullEval) Incremental(facts.Reader, []facts.Change) eval.Plan           { return eval.Plan{} }
func (nullEval) Continue(int64, facts.Reader, []facts.Change, bool) eval.Plan { return eval.Plan{} }
func (nullEval) Uncommitted()                                                 {}
func (nullEval) TimedRules() []string                                         { return nil }
func (nullEval) Version() string                                              { return "null" }

// Random plans over a small key space (so firings write the same keys and
// read each other's writes), some firings stale before they commit, under
// random transaction limits. Whatever commits must show, in etcd's history:
// each record at the revision of its writes; every compared read unchanged
// up to that revision; every value read from an earlier firing committed at
// or before it; no firing twice; no stale firing at all.
func TestRandomPlansKeepInvariants(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	v := newEnv(t)
	key := func(i int) string { return facts.EffectiveInstances("k" + strconv.Itoa(i)) }
	const space = 12
	for round := 0; round < 6; round++ {
		cfg := testConfig()
		cfg.MaxTxnOps = 4 + rng.IntN(12)
		e := v.engine(t, nullEval{}, cfg)
		if err := v.mirror.WaitRev(v.ctx, v.put(t, "desired/service/sync/instances", strconv.Itoa(round))); err != nil {
			t.Fatal(err)
		}
		cur := map[string]int64{} // modrev of each key as the plan is built (0: absent)
		v.mirror.View(func(r facts.Reader) {
			for i := 0; i < space; i++ {
				if f, ok := r.Get(key(i)); ok {
					cur[key(i)] = f.ModRevision
				}
			}
		})
		written := map[string]bool{} // written earlier in this plan
		var p eval.Plan
		p.RuleSetVersion = "random"
		stale := map[string]bool{} // bindings of firings made stale before the commit
		var staleKeys []string
		for f := 0; f < 5+rng.IntN(30); f++ {
			fr := eval.Firing{Rule: "random", Kind: "emit", Bindings: map[string]string{"f": fmt.Sprintf("%d-%d", round, f)}}
			seen := map[string]bool{}
			for n := 1 + rng.IntN(3); n > 0; n-- {
				k := key(rng.IntN(space))
				if seen[k] {
					continue
				}
				seen[k] = true
				if written[k] {
					fr.Reads = append(fr.Reads, eval.Read{Key: k, Own: true})
				} else {
					fr.Reads = append(fr.Reads, eval.Read{Key: k, Rev: cur[k]})
				}
				fr.Writes = append(fr.Writes, eval.Write{Key: k, Value: []byte(strconv.Itoa(rng.IntN(1000)))})
			}
			if rng.IntN(6) == 0 && !written[key(space)] { // read a key someone else will change
				fr.Reads = append(fr.Reads, eval.Read{Key: key(space), Rev: cur[key(space)]})
				stale[fr.Bindings["f"]] = true
				staleKeys = append(staleKeys, key(space))
			}
			for _, w := range fr.Writes {
				written[w.Key] = true
			}
			p.Firings = append(p.Firings, fr)
		}
		if len(staleKeys) > 0 {
			v.put(t, key(space), strconv.Itoa(round)) // the change that makes them stale
			cur[key(space)] = -1
		}
		if err := e.apply(v.ctx, nil, nullEval{}, p); err != nil {
			t.Fatal(err)
		}

		perBinding := map[string]int{}
		for _, ev := range v.events(t) {
			if ev.Rule != "random" || ev.Bindings["f"] == "" {
				continue
			}
			b := ev.Bindings["f"]
			perBinding[b]++
			if stale[b] {
				t.Errorf("firing %s committed although a fact it read changed", b)
			}
			for _, w := range ev.Writes {
				f := getAt(t, v, w.Key, ev.Rev)
				if f == nil || f.ModRevision != ev.Rev || string(f.Value) != string(w.Value) {
					t.Errorf("firing %s: %s at its record's revision %d: %+v", b, w.Key, ev.Rev, f)
				}
			}
			for _, r := range ev.Reads {
				if r.Own {
					if r.Rev != 0 && (r.Rev >= ev.Rev || getAt(t, v, r.Key, r.Rev).ModRevision != r.Rev) {
						t.Errorf("firing %s read its plan's %s from revision %d, committed at %d", b, r.Key, r.Rev, ev.Rev)
					}
					continue
				}
				var before int64
				if f := getAt(t, v, r.Key, ev.Rev-1); f != nil {
					before = f.ModRevision
				}
				if before != r.Rev {
					t.Errorf("firing %s read %s at %d, but it was at %d when the firing committed (%d)", b, r.Key, r.Rev, before, ev.Rev)
				}
			}
		}
		for b, n := range perBinding {
			if n > 1 {
				t.Errorf("firing %s committed %d times", b, n)
			}
		}
		if t.Failed() {
			raw, _ := json.MarshalIndent(p.Firings, "", " ")
			t.Fatalf("round %d, max %d ops, plan:\n%s", round, cfg.MaxTxnOps, raw)
		}
	}
}

// getAt returns key as it was at revision rev (nil: absent).
func getAt(t *testing.T, v *env, key string, rev int64) *facts.Fact {
	t.Helper()
	f, ok, err := v.store.GetAt(v.ctx, key, rev)
	if err != nil {
		t.Fatalf("get %s at %d: %v", key, rev, err)
	}
	if !ok {
		return nil
	}
	return &facts.Fact{Key: key, Value: f.Value, ModRevision: f.ModRevision, CreateRevision: f.CreateRevision}
}
