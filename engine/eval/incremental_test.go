package eval_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// views is a chain of derived views: instances per service (an aggregate
// joined on a value) feed a policy intent, which feeds the effective count
// (optional patterns); endpoints join instances with exposed ports.
const views = `rule "count_instances" {
  doc       = "The policy intent of a service is the number of its running instances, when there is one."
  principal = "policy"
  match {
    svc = "desired/service/{name}"
  }
  aggregate "n" {
    match {
      name  = "observed/instance/{i}/service"
      state = "observed/instance/{i}/state"
    }
    where = "state == 'running'"
    count = true
  }
  when = "n > 0"
  derive "intent/policy/service/{name}/instances" {
    value = "n"
  }
}

rule "resolve_intent" {
  doc       = "Effective: policy, else user."
  principal = "intent-resolver"
  match {
    user = "intent/user/service/{name}/instances"
  }
  optional {
    policy = "intent/policy/service/{name}/instances"
  }
  derive "effective/service/{name}/instances" {
    value = "policy.orValue(user)"
  }
}
` + endpointRule

// TestIncrementalEqualsFull: after any sequence of changes, evaluating
// incrementally to a fixpoint leaves exactly the views a full evaluation
// of the final facts derives; also when the evaluator keeps nothing from
// a round at rest (WithoutKeepingAtRest) and is called again anyway.
func TestIncrementalEqualsFull(t *testing.T) {
	for _, atRest := range []bool{false, true} {
		t.Run(fmt.Sprintf("without-keeping-at-rest=%v", atRest), func(t *testing.T) { incrementalEqualsFull(t, atRest) })
	}
}

func incrementalEqualsFull(t *testing.T, atRest bool) {
	rs := loadSrc(t, views)
	var opts []eval.Option
	if atRest {
		opts = append(opts, eval.WithoutKeepingAtRest())
	}
	derived := func(k string) bool {
		return strings.HasPrefix(k, "endpoint/") || strings.HasPrefix(k, "effective/") || strings.HasPrefix(k, "intent/policy/")
	}
	for seed := uint64(0); seed < 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		type kv struct{ k, v string }
		var pool []kv
		for s := 0; s < 3; s++ {
			svc := fmt.Sprintf("s%d", s)
			pool = append(pool, kv{facts.DesiredService(svc), `{}`}, kv{facts.ServiceExpose(svc, 80+s), `{}`},
				kv{facts.Intent("user", svc), fmt.Sprint(1 + s)})
		}
		for i := 0; i < 6; i++ {
			id := fmt.Sprintf("a000%d", i)
			pool = append(pool,
				kv{facts.InstanceService(id), fmt.Sprintf(`"s%d"`, r.IntN(3))},
				kv{facts.InstanceState(id), []string{`"running"`, `"pending"`}[r.IntN(2)]},
				kv{facts.InstanceIP(id), fmt.Sprintf(`"10.0.0.%d"`, i)})
		}
		inc := newTable()
		ev := eval.New(rs, opts...)
		settle := func(p eval.Plan, tb *table, ev *eval.Evaluator) {
			for round := 0; round < 20; round++ {
				if len(p.Problems) > 0 {
					t.Fatalf("seed %d: problems %v", seed, p.Problems)
				}
				if len(p.Firings) == 0 {
					return
				}
				p = ev.Incremental(tb, tb.apply(p))
			}
			t.Fatalf("seed %d: no fixpoint", seed)
		}
		settle(ev.Full(inc), inc, ev)
		for step := 0; step < 25; step++ {
			f := pool[r.IntN(len(pool))]
			var ch facts.Change
			switch r.IntN(3) {
			case 0: // delete
				if _, ok := inc.Get(f.k); !ok {
					continue
				}
				inc.rev++
				old, _ := inc.Delete(f.k)
				ch = facts.Change{Fact: old, Deleted: true}
			case 1: // change the value where the pool allows another
				v := f.v
				switch {
				case strings.HasSuffix(f.k, "/service"):
					v = fmt.Sprintf(`"s%d"`, r.IntN(3))
				case strings.HasSuffix(f.k, "/state"):
					v = []string{`"running"`, `"pending"`}[r.IntN(2)]
				}
				ch = inc.put(f.k, v)
			default:
				ch = inc.put(f.k, f.v)
			}
			settle(ev.Incremental(inc, []facts.Change{ch}), inc, ev)
		}
		// A fresh evaluator on the same base facts, from nothing derived.
		full := newTable()
		for _, k := range inc.Keys() {
			if !derived(k) {
				v, _ := inc.Get(k)
				full.put(k, string(v.Value))
			}
		}
		fev := eval.New(rs)
		settle(fev.Full(full), full, fev)
		got, want := map[string]string{}, map[string]string{}
		for _, k := range inc.Keys() {
			if derived(k) {
				v, _ := inc.Get(k)
				got[k] = string(v.Value)
			}
		}
		for _, k := range full.Keys() {
			if derived(k) {
				v, _ := full.Get(k)
				want[k] = string(v.Value)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: incremental views\n%v\nfull evaluation\n%v", seed, got, want)
		}
	}
}
