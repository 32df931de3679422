package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/rules"
)

const invalidRules = `
rule "size" {
  doc       = "effective/service/{name}/instances follows the desired count, times the cpu when one is given."
  principal = "intent-resolver"
  match {
    n = "desired/service/{name}/instances"
  }
  optional {
    cpu = "desired/service/{name}/resources/cpu"
  }
  emit "effective/service/{name}/instances" {
    value = "cpu.hasValue() ? n * int(cpu.value()) : n"
  }
}
`

// A bad value written past apply is absent for the bindings that read it:
// the firing that reads it commits (guarded by the bad value's revision,
// never by an absence etcd cannot meet), other services go on, and the
// fact is recorded once, as an event of kind invalid, until it changes.
func TestInvalidFactIsAbsentAndRecordedOnce(t *testing.T) {
	v := newEnv(t)
	rs, diags := rules.LoadFiles(map[string][]byte{"size.hcl": []byte(invalidRules)}, rules.WithSchema(v.store.Schema))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	raw := func(k, val string) {
		t.Helper()
		if _, err := etcdtest.PutRaw(v.ctx, v.store, k, val); err != nil {
			t.Fatal(err)
		}
	}
	v.put(t, facts.ServiceInstances("web"), `3`)
	raw(facts.ServiceCPU("web"), `-3`)
	e := v.engine(t, NewRuleSetEvaluator(rs, nil), testConfig())
	v.run(t, e)
	v.waitValue(t, facts.EffectiveInstances("web"), `3`) // as if no cpu were given

	raw(facts.ServiceCPU("api"), `"lots"`)
	v.put(t, facts.ServiceInstances("api"), `2`)
	v.put(t, facts.ServiceInstances("db"), `1`)
	v.put(t, facts.ServiceCPU("db"), `2`)
	v.waitValue(t, facts.EffectiveInstances("api"), `2`)
	v.waitValue(t, facts.EffectiveInstances("db"), `2`)

	records := func() map[string]int {
		out := map[string]int{}
		for _, ev := range v.events(t) {
			if ev.Kind == KindInvalid {
				out[ev.Bindings["key"]]++
				if !strings.Contains(ev.Message, "invalid value") || ev.Bindings["value"] == "" {
					t.Errorf("record %s: %+v", ev.Key, ev.EventRecord)
				}
			}
		}
		return out
	}
	want := fmt.Sprint(map[string]int{facts.ServiceCPU("api"): 1, facts.ServiceCPU("web"): 1})
	deadline := time.Now().Add(10 * time.Second)
	for fmt.Sprint(records()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("records of invalid facts %v, want %s", records(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// More rounds: nothing recorded again, nothing conflicts.
	v.put(t, facts.ServiceInstances("web"), `4`)
	v.waitValue(t, facts.EffectiveInstances("web"), `4`)
	if got := fmt.Sprint(records()); got != want {
		t.Errorf("after more rounds: records %s, want %s", got, want)
	}
	st := e.Stats()
	if st.Conflicts > 2 || st.GaveUp > 0 || st.InvalidRecords != 2 {
		t.Errorf("stats: %d conflicts, %d plans given up, %d invalid records; want few, none, 2", st.Conflicts, st.GaveUp, st.InvalidRecords)
	}
	// A new bad value of the same key is recorded again.
	raw(facts.ServiceCPU("web"), `-4`)
	deadline = time.Now().Add(10 * time.Second)
	for records()[facts.ServiceCPU("web")] != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the changed bad value is not recorded: %v", records())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
