package eval

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ccattler/ccattler/rules"
)

// queueModel is what a round's queues held before they were carried as
// queues: the tasks handed to push one after the other, the first of each
// key kept, a whole task (key "") subsuming the rest, run in key order.
func queueModel(ts []task) []string {
	seen := map[string]bool{}
	var keys []string
	for _, t := range ts {
		switch {
		case seen[""]:
		case t.key == "":
			keys, seen = []string{""}, map[string]bool{"": true}
		case !seen[t.key]:
			seen[t.key] = true
			keys = append(keys, t.key)
		}
	}
	slices.Sort(keys)
	return keys
}

// The queues a cut round carries, and those a pass takes, hold what
// pushing the same tasks one by one held, in key order, the first of each
// key kept; and the carried queue an earlier round left is never written,
// since a round redone for an oscillation takes it again.
func TestCarriedQueuesHoldWhatPushHeld(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"", "a", "b", "c", "d", "e", "f", "g"}
	pick := func() string { return alphabet[rng.IntN(len(alphabet))] }
	keys := func() []string {
		out := make([]string, rng.IntN(11))
		for i := range out {
			out[i] = pick()
		}
		return out
	}
	for n := range 5000 {
		if err := checkCarriedQueues(rng, keys, pick); err != nil {
			t.Fatalf("case %d: %v", n, err)
		}
	}
}

func checkCarriedQueues(rng *rand.Rand, keys func() []string, pick func() string) error {
	{
		r := &rules.Rule{Name: "r", Index: 0}
		rd := queueRound(r)
		// The earlier round's carried queue, as carry made it.
		var before []task
		for i, k := range keys() {
			before = append(before, task{r: r, key: k, b: &binding{}, rest: i%2 == 0})
		}
		rd.carry(before, func(int) bool { return false })
		carried := rd.e.carry[0]
		if got, want := keysOf(carried), queueModel(before); !slices.Equal(got, want) {
			return fmt.Errorf("carried %v, want %v", got, want)
		}
		kept := slices.Clone(carried)
		rd.install(rd.e.carry)
		// This round's changes queue more; some repeat a carried key.
		pushed := slices.Clone(carried)
		for _, k := range keys() {
			tk := task{r: r, key: k, b: &binding{}}
			rd.push(tk, false)
			pushed = append(pushed, tk)
		}
		if rng.IntN(2) == 0 {
			// Cut before the rule ran: a task of the cut comes first.
			first := []task{{r: r, key: pick(), b: &binding{}}}
			rd.carry(first, func(int) bool { return true })
			if got, want := keysOf(rd.e.carry[0]), queueModel(append(first, pushed...)); !slices.Equal(got, want) {
				return fmt.Errorf("carried again %v, want %v", got, want)
			}
		} else if got, want := keysOf(rd.take(0)), queueModel(pushed); !slices.Equal(got, want) {
			return fmt.Errorf("a pass took %v, want %v", got, want)
		}
		for i := range kept {
			if carried[i] != kept[i] {
				return fmt.Errorf("the carried queue was written: %v, was %v", keysOf(carried), keysOf(kept))
			}
		}
	}
	return nil
}

// Tasks a rule stopped for oscillating left (parked) go to the next call
// in its queue like the others, in key order without repeats, and do not
// ask for that call at once. push parks a task as it is handed it, before
// naming it by its binding: carry names it, or it would pass for the
// rule's whole task and subsume the others.
func TestParkedTasksAreCarriedAsQueues(t *testing.T) {
	r := &rules.Rule{Name: "r", Index: 0}
	rd := queueRound(r)
	for _, k := range []string{"c", "a", "c", "b"} {
		rd.parked = append(rd.parked, task{r: r, key: k, b: &binding{}})
	}
	rd.carry(nil, func(int) bool { return false })
	if got, want := keysOf(rd.e.carry[0]), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("parked tasks carried as %v, want %v", got, want)
	}
	if rd.plan.More {
		t.Error("parked tasks alone asked for the next call at once")
	}

	rd = queueRound(r)
	var want []string
	for _, id := range []string{"0000b", "0000a"} {
		b := &binding{}
		b.push("id", strVal(id))
		rd.parked = append(rd.parked, task{r: r, b: b}) // as push parks it: not named yet
		want = append(want, b.key())
	}
	slices.Sort(want)
	rd.carry(nil, func(int) bool { return false })
	if got := keysOf(rd.e.carry[0]); !slices.Equal(got, want) {
		t.Errorf("parked tasks under bindings carried as %q, want %q", got, want)
	}
}

// queueRound is a round of a rule set of rules, with nothing queued.
func queueRound(rs ...*rules.Rule) *round {
	n := len(rs)
	rd := &round{e: &Evaluator{rs: &rules.RuleSet{Rules: rs}, waits: make([]*waitSet, n), probes: make([][]probe, n)},
		queue: make([][]task, n), sorted: make([]int, n), queued: make([]map[string]bool, n),
		stopped: map[string]bool{}, oscillated: map[string]bool{}, plan: &Plan{}}
	for i := range rd.queued {
		rd.queued[i] = map[string]bool{}
	}
	return rd
}

// settle keeps, of equal keys, the task that came first: a rest task
// (the remainder of a whole evaluation a budget cut) keeps its flag.
func TestSettleKeepsTheFirstOfEqualKeys(t *testing.T) {
	ts := []task{{key: "a"}, {key: "c", rest: true}, {key: "b"}, {key: "c"}, {key: "a"}}
	got := settle(ts, 2, false)
	if want := []string{"a", "b", "c"}; !slices.Equal(keysOf(got), want) {
		t.Fatalf("settle: %v, want %v", keysOf(got), want)
	}
	if !got[2].rest {
		t.Errorf("the later task under c replaced the first")
	}
}

func keysOf(ts []task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.key
	}
	return out
}
