package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/engine/eval/ruletest"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"github.com/ccattler/ccattler/rules"
)

// TestRuleSetsAgainstEtcd runs the rule tests written as data (engine/testdata
// and the evaluator's engine/eval/testdata) through the whole engine on a
// real etcd: each step's facts are written to etcd, the engine evaluates
// and commits until it settles, and etcd's content must show the expected
// writes and deletes, with a firing record for every expected firing.
func TestRuleSetsAgainstEtcd(t *testing.T) {
	t.Parallel()
	var dirs []string
	for _, pat := range []string{"testdata/*", "eval/testdata/*"} {
		m, _ := filepath.Glob(pat)
		for _, d := range m {
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				if ts, _ := ruletest.Find(d); len(ts) > 0 {
					dirs = append(dirs, d)
				}
			}
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no rule test directories")
	}
	et := etcdtest.Start(t)
	client := et.Store(t)
	n := 0
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			schema := facts.NewSchema()
			rs, diags := rules.Load(dir, rules.WithSchema(schema))
			if diags.HasErrors() {
				t.Fatalf("load %s: %s", dir, diags.Error())
			}
			paths, _ := ruletest.Find(dir)
			tests, _, diags := ruletest.Parse(paths, schema)
			if diags.HasErrors() {
				t.Fatalf("parse tests of %s: %s", dir, diags.Error())
			}
			for _, tc := range tests {
				n++
				root := fmt.Sprintf("/rt%d/", n) // a fresh tree per test on the shared etcd
				t.Run(tc.Name, func(t *testing.T) {
					store := client.WithRoot(root)
					store.Schema = schema
					runRuleTest(t, store, rs, tc)
				})
			}
		})
	}
}

func runRuleTest(t *testing.T, store *facts.Store, rs *rules.RuleSet, tc *ruletest.Test) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := facts.NewMirror(store, nil)
	mdone := make(chan struct{})
	go func() { defer close(mdone); m.Run(ctx) }()
	defer func() { cancel(); <-mdone }()
	v := &env{store: store, mirror: m, ctx: ctx}

	now := tc.Now
	ev := NewRuleSetEvaluator(rs, nil, eval.WithSeed(tc.Seed), eval.WithClock(func() time.Time { return now }))
	cfg := testConfig()
	cfg.LeaderPrefix = strings.TrimSuffix(store.Root, "/") + "-leader/"
	e := v.engine(t, ev, cfg)
	var edone chan struct{}
	defer func() {
		cancel()
		if edone != nil {
			<-edone
		}
	}()

	// A fixture's leased facts go on one real etcd lease, as an agent's do.
	lease, err := store.Grant(ctx, time.Hour)
	if err != nil {
		t.Fatalf("grant a lease: %v", err)
	}
	state := map[string][]byte{}
	for i, step := range tc.Steps {
		txn := facts.Txn{Checked: true} // fixtures are encoded already; raw ones are meant to be invalid
		before := map[string][]byte{}
		for k, val := range state {
			before[k] = val
		}
		for _, f := range step.Puts {
			op := facts.Put(f.Key, f.Value)
			if f.Lease != 0 {
				op.Lease = lease
			}
			txn.Ops = append(txn.Ops, op)
			before[f.Key] = f.Value
		}
		for _, k := range step.Dels {
			txn.Ops = append(txn.Ops, facts.Delete(k))
			delete(before, k)
		}
		start, err := store.Commit(ctx, txn)
		if err != nil {
			t.Fatalf("step %d: write facts: %v", i, err)
		}
		if i == 0 {
			edone = make(chan struct{})
			go func() { defer close(edone); e.Run(ctx) }()
		}
		settle(t, v, e)
		state = snapshotFacts(t, v)
		firings := map[string]int{}
		for _, r := range v.events(t) {
			if r.Rev > start && r.Kind != KindRejection {
				firings[r.Rule]++
			}
		}
		if step.Expect == nil {
			continue
		}
		where := fmt.Sprintf("%s (step %d %q)", step.Range, i, step.Name)
		for _, d := range diffState(step.Expect, before, state) {
			t.Errorf("%s: %s", where, d)
		}
		for rule, want := range step.Expect.Firings {
			if firings[rule] != want {
				t.Errorf("%s: rule %s: %d firing records, want %d", where, rule, firings[rule], want)
			}
		}
		st := e.Stats()
		for _, rule := range step.Expect.Problems {
			if st.ProblemsByRule[rule] == 0 {
				t.Errorf("%s: rule %s: no problem reported", where, rule)
			}
		}
	}
}

// settle waits until the engine has evaluated every change in etcd and
// committed what it planned.
func settle(t *testing.T, v *env, e *Engine) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	stable := 0
	var last int64
	for stable < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("engine did not settle: %+v", e.Stats())
		}
		rev, err := v.store.Revision(v.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.mirror.WaitRev(v.ctx, rev); err != nil {
			t.Fatal(err)
		}
		if st := e.Stats(); st.SettledRev >= rev && rev == last {
			stable++
		} else {
			stable = 0
		}
		last = rev
		time.Sleep(20 * time.Millisecond)
	}
}

// snapshotFacts returns every fact in etcd but the firing records.
func snapshotFacts(t *testing.T, v *env) map[string][]byte {
	fs, _, err := v.store.List(v.ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range fs {
		if !strings.HasPrefix(f.Key, "event/") {
			out[f.Key] = f.Value
		}
	}
	return out
}

// diffState compares a step's net change with its expected writes and
// deletes ('*' matches one key segment).
func diffState(e *ruletest.Expect, before, after map[string][]byte) []string {
	var out []string
	matched := map[string]bool{}
	var keys []string
	for k := range after {
		if old, ok := before[k]; !ok || !bytes.Equal(old, after[k]) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	// A wildcard key given a list of values owns the keys it matches: their
	// values must be the list's, in any order.
	for p, vals := range e.Multi {
		var got, want []string
		rest := keys[:0]
		for _, k := range keys {
			if _, exact := e.Writes[k]; !exact && ruletest.KeyMatch(p, k) {
				got = append(got, string(after[k]))
			} else {
				rest = append(rest, k)
			}
		}
		keys = rest
		for _, v := range vals {
			want = append(want, string(v))
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			out = append(out, fmt.Sprintf("~ %s: expected values %v, got %v", p, want, got))
		}
	}
	for _, k := range keys {
		val := after[k]
		pat, ok := "", false
		for p := range e.Writes {
			if ruletest.KeyMatch(p, k) && (!ok || p == k) {
				pat, ok = p, true
			}
		}
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("+ %s = %s (written, not expected)", k, val))
		case !bytes.Equal(e.Writes[pat], val):
			out = append(out, fmt.Sprintf("~ %s: expected %s, got %s", k, e.Writes[pat], val))
			matched[pat] = true
		default:
			matched[pat] = true
		}
	}
	for p, val := range e.Writes {
		if !matched[p] {
			out = append(out, fmt.Sprintf("- %s = %s (expected, not written)", p, val))
		}
	}
	dm := map[string]bool{}
	for k := range before {
		if _, ok := after[k]; ok {
			continue
		}
		hit := false
		for _, p := range e.Deletes {
			if ruletest.KeyMatch(p, k) {
				hit, dm[p] = true, true
			}
		}
		if !hit {
			out = append(out, fmt.Sprintf("+ %s (deleted, not expected)", k))
		}
	}
	for _, p := range e.Deletes {
		if !dm[p] {
			out = append(out, fmt.Sprintf("- %s (expected deleted, still there)", p))
		}
	}
	sort.Strings(out)
	return out
}

// hookEval runs hook on the first plan that has firings, while the
// evaluator still holds the mirror's view: a write made there lands between
// the plan's reads and its commit.
type hookEval struct {
	Evaluator
	done bool
	hook func(p *eval.Plan)
}

func (h *hookEval) Full(r facts.Reader) eval.Plan { return h.after(h.Evaluator.Full(r)) }
func (h *hookEval) Incremental(r facts.Reader, c []facts.Change) eval.Plan {
	return h.after(h.Evaluator.Incremental(r, c))
}
func (h *hookEval) Continue(from int64, r facts.Reader, c []facts.Change, tick bool) eval.Plan {
	return h.after(h.Evaluator.Continue(from, r, c, tick))
}
func (h *hookEval) after(p eval.Plan) eval.Plan {
	if !h.done && len(p.Firings) > 0 {
		h.done = true
		h.hook(&p)
	}
	return p
}

// A fresh id the rule set drew is created by someone else before the plan
// commits: the firing fails its "still absent" guard, is evaluated again and
// draws another id; the other writer's key is left alone.
func TestFreshIDCollisionWithRules(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	rs, diags := rules.Load("eval/testdata/fresh", rules.WithSchema(v.store.Schema))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	v.put(t, facts.ServiceInstances("web"), "2")
	var stolen string
	ev := &hookEval{Evaluator: NewRuleSetEvaluator(rs, nil, eval.WithSeed(7))}
	ev.hook = func(p *eval.Plan) {
		for _, f := range p.Firings {
			for _, w := range f.Writes {
				if strings.HasSuffix(w.Key, "/service") {
					stolen = w.Key
					v.put(t, w.Key, `"other"`)
					return
				}
			}
		}
		t.Errorf("no instance created in the first plan: %+v", p.Firings)
	}
	e := v.engine(t, ev, testConfig())
	v.run(t, e)
	settle(t, v, e)

	if f, _ := v.get(t, stolen); string(f.Value) != `"other"` {
		t.Errorf("%s overwritten: %s", stolen, f.Value)
	}
	state := snapshotFacts(t, v)
	web := 0
	for k, val := range state {
		if strings.HasSuffix(k, "/service") && string(val) == `"web"` {
			web++
			id := strings.Split(k, "/")[2]
			if st := state[facts.InstanceState(id)]; string(st) != `"pending"` {
				t.Errorf("instance %s: state %s, want pending", id, st)
			}
		}
	}
	if web != 2 {
		t.Errorf("%d instances of web, want 2: %v", web, state)
	}
	if st := e.Stats(); st.Conflicts < 1 || st.FiringsByRule["create_instances"] != 2 {
		t.Errorf("want a conflict and 2 committed firings: %+v", st)
	}
}

// A choice that places nothing leaves one rejection record naming every
// candidate and the filters it failed, written again only when the reasons
// change.
func TestRejectionRecords(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	rs, diags := rules.Load("eval/testdata/choice", rules.WithSchema(v.store.Schema))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	for k, val := range map[string]string{
		facts.ServiceCPU("web"):         "2",
		facts.NodeState("node-1"):       `"alive"`,
		facts.NodeCapacityCPU("node-1"): "1",
		facts.NodeState("node-2"):       `"unreachable"`,
		facts.NodeCapacityCPU("node-2"): "4",
		facts.InstanceService("a8f31"):  `"web"`,
		facts.InstanceState("a8f31"):    `"pending"`,
	} {
		v.put(t, k, val)
	}
	e := v.engine(t, NewRuleSetEvaluator(rs, nil), testConfig())
	v.run(t, e)
	settle(t, v, e)
	rejections := func() []event {
		var out []event
		for _, ev := range v.events(t) {
			if ev.Kind == KindRejection {
				out = append(out, ev)
			}
		}
		return out
	}
	rs1 := rejections()
	if len(rs1) != 1 {
		t.Fatalf("want 1 rejection record, have %+v", rs1)
	}
	r := rs1[0]
	got := fmt.Sprintf("%s %s %v", r.Rule, r.Bindings["id"], r.Rejected)
	want := "schedule a8f31 [{map[node:node-1] [cpu]} {map[node:node-2] [alive]}]"
	if got != want {
		t.Errorf("rejection record: %s, want %s", got, want)
	}

	v.put(t, facts.InstanceState("a8f31"), `"pending"`) // same value again: evaluated, same reasons
	settle(t, v, e)
	if n := len(rejections()); n != 1 {
		t.Errorf("an unchanged rejection was recorded again: %d records", n)
	}
	v.put(t, facts.NodeState("node-2"), `"alive"`)
	settle(t, v, e)
	if f, _ := v.get(t, facts.Placement("a8f31")); string(f.Value) != `"node-2"` {
		t.Errorf("placement after node-2 came back: %s", f.Value)
	}
	if n := len(rejections()); n != 1 {
		t.Errorf("a placed instance got a rejection record: %d records", n)
	}
}

// Rules that read the clock are evaluated every TickInterval: time passing
// is not a fact change, yet it makes their guards true.
func TestTickEvaluatesTimedRules(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	rs, diags := rules.LoadFiles(map[string][]byte{"timeout.hcl": []byte(`
rule "give_up" {
  doc       = "A pending instance that has not started within two seconds of its start time has failed."
  principal = "failure"
  match {
    state   = "observed/instance/{id}/state"
    started = "observed/instance/{id}/started_at"
  }
  when = "state == 'pending' && now - started > duration('2s')"
  emit "observed/instance/{id}/state" {
    value = "'failed'"
  }
}
`)}, rules.WithSchema(v.store.Schema))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	v.put(t, facts.InstanceState("a8f31"), `"pending"`)
	v.put(t, facts.InstanceStartedAt("a8f31"), fmt.Sprintf("%q", time.Now().UTC().Format(time.RFC3339Nano)))
	cfg := testConfig()
	cfg.TickInterval = 100 * time.Millisecond
	e := v.engine(t, NewRuleSetEvaluator(rs, nil), cfg)
	v.run(t, e)
	settle(t, v, e)
	if f, _ := v.get(t, facts.InstanceState("a8f31")); string(f.Value) != `"pending"` {
		t.Fatalf("state %s before the timeout", f.Value)
	}
	v.waitValue(t, facts.InstanceState("a8f31"), `"failed"`)
	waitFor(t, "the firing counted", 5*time.Second, func() bool { return e.Stats().FiringsByRule["give_up"] == 1 })
	if st := e.Stats(); st.TickRounds == 0 {
		t.Errorf("want tick rounds and one firing of give_up: %+v", st)
	}
}

// The engine's Work adds up what its evaluators did: it grows with the
// rounds a change causes, and a swapped-in evaluator's work is added to
// the last one's, neither lost nor counted twice.
func TestWorkCountsEveryEvaluator(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	rs, diags := rules.Load("eval/testdata/aggregate", rules.WithSchema(v.store.Schema))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	first := NewRuleSetEvaluator(rs, nil, eval.WithSeed(1))
	e := v.engine(t, first, testConfig())
	v.run(t, e)
	v.put(t, facts.Intent("user", "web"), "3")
	settle(t, v, e)
	w1 := e.Stats().Work
	if w1.Tasks == 0 || w1.Evals == 0 || w1.FactsVisited == 0 || w1.Aggregates == 0 {
		t.Fatalf("work after creating 3 instances: %+v: want tasks, evaluations, facts visited and an aggregate computed", w1)
	}
	if own := workOf(first.(ruleSetEvaluator).Stats()); own != w1 {
		t.Fatalf("engine counts %+v, its one evaluator %+v", w1, own)
	}

	second := NewRuleSetEvaluator(rs, nil, eval.WithSeed(2))
	e.Swap(second)
	v.put(t, facts.Intent("user", "web"), "5")
	settle(t, v, e)
	w2 := e.Stats().Work
	if d := w2.Sub(w1); d.Tasks <= 0 || d.Evals <= 0 {
		t.Fatalf("work after the swap and a change grew by %+v: want more tasks and evaluations", d)
	}
	// The second evaluator's own counters are what the engine added,
	// the first's stopped at the swap.
	if d, own := w2.Sub(w1), workOf(second.(ruleSetEvaluator).Stats()); d != own {
		t.Errorf("engine added %+v since the swap, the new evaluator did %+v", d, own)
	}
	if own := workOf(first.(ruleSetEvaluator).Stats()); own != w1 {
		t.Errorf("the swapped-out evaluator worked on: %+v, was %+v", own, w1)
	}
}
