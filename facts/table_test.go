package facts_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// TestTableIndexesFollowPutsAndDeletes drives a table through random puts
// (new keys, new values for old keys, values that leave or join the value
// index) and deletes, and checks every index against a brute-force reading
// of the facts it should hold: a fact removed from the middle of a type's
// or a value's list moves the last one into its place, and a position
// left stale would visit a fact twice, miss one, or keep a deleted one.
func TestTableIndexesFollowPutsAndDeletes(t *testing.T) {
	state, _ := facts.Default.Type("observed.instance.state")
	node, _ := facts.Default.Type("observed.instance.node")
	image, _ := facts.Default.Type("desired.service.image")
	ep, _ := facts.Default.Type("endpoint.service")
	types := []*facts.FactType{state, node, image, ep}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	ids := []string{"a8f31", "b72c9", "c0ffe", "d00d1", "e1e10", "f00ba"}
	svcs := []string{"web", "api", "db"}
	pick := func(l []string) string { return l[rng.IntN(len(l))] }
	for run := 0; run < 500; run++ {
		tb := facts.NewTable(nil)
		model := map[string]string{}
		for step := 1 + rng.IntN(120); step > 0; step-- {
			var key string
			switch rng.IntN(4) {
			case 0:
				key = facts.InstanceState(pick(ids))
			case 1:
				key = facts.InstanceNode(pick(ids))
			case 2:
				key = facts.ServiceImage(pick(svcs))
			case 3:
				key = facts.Endpoint(pick(svcs), pick(ids))
			}
			if rng.IntN(4) == 0 {
				_, had := tb.Delete(key)
				if _, want := model[key]; had != want {
					t.Fatalf("run %d: Delete(%s) found %v, want %v", run, key, had, want)
				}
				delete(model, key)
				continue
			}
			v := pick(tableValues)
			tb.Put(facts.Fact{Key: key, Value: []byte(v)})
			model[key] = v
		}
		typed := 0
		for k := range model {
			if _, err := facts.Default.KeyType(k); err == nil {
				typed++
			}
		}
		if typed != len(model) {
			t.Fatalf("run %d: %d of the %d keys put are of no fact type", run, len(model)-typed, len(model))
		}
		if tb.Len() != len(model) {
			t.Fatalf("run %d: Len() = %d, want %d", run, tb.Len(), len(model))
		}
		for _, ty := range types {
			var want []string
			byValue := map[string][]string{}
			for k, v := range model {
				if kt, err := facts.Default.KeyType(k); err != nil || kt != ty {
					continue
				}
				want = append(want, k)
				if s, ok := facts.StringValue([]byte(v)); ok {
					byValue[s] = append(byValue[s], k)
				}
			}
			got := visited(t, func(fn func(facts.Fact) bool) { tb.OfType(ty, fn) })
			if !equalSets(got, want) || tb.CountOfType(ty) != len(want) {
				t.Fatalf("run %d: OfType(%s) = %v (count %d), want %v", run, ty.Name, got, tb.CountOfType(ty), want)
			}
			for _, v := range tableValues {
				s, ok := facts.StringValue([]byte(v))
				if !ok {
					continue
				}
				got := visited(t, func(fn func(facts.Fact) bool) { tb.ByValue(ty, s, fn) })
				if !equalSets(got, byValue[s]) || tb.CountByValue(ty, s) != len(byValue[s]) {
					t.Fatalf("run %d: ByValue(%s, %q) = %v (count %d), want %v", run, ty.Name, s, got, tb.CountByValue(ty, s), byValue[s])
				}
			}
		}
		for _, id := range ids {
			var want []string
			for _, svc := range svcs {
				if _, ok := model[facts.Endpoint(svc, id)]; ok {
					want = append(want, facts.Endpoint(svc, id))
				}
			}
			got := visited(t, func(fn func(facts.Fact) bool) { tb.ByVar(ep, 1, id, fn) })
			if !equalSets(got, want) {
				t.Fatalf("run %d: ByVar(endpoint, 1, %s) = %v, want %v", run, id, got, want)
			}
		}
	}
}

// tableValues are the values the test puts: short strings the value index
// lists, an object it does not, and a string too long for it.
var tableValues = []string{`"pending"`, `"running"`, `"n1"`, `"n2"`, `"nginx:1.28"`, `{"ip":"10.0.0.1","port":80}`, `"` + strings.Repeat("x", 200) + `"`}

// visited collects the keys a visit reaches, failing on a key reached twice.
func visited(t *testing.T, visit func(func(facts.Fact) bool)) []string {
	t.Helper()
	var keys []string
	visit(func(f facts.Fact) bool {
		if slices.Contains(keys, f.Key) {
			t.Fatalf("%s visited twice", f.Key)
		}
		keys = append(keys, f.Key)
		return true
	})
	return keys
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestTableListsShrinkAndStayRight: a type's list and a value's that
// held hundreds of facts shrink as they leave (copied to a smaller array
// past a quarter of their room), and what is left is found exactly.
func TestTableListsShrinkAndStayRight(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	state, _ := facts.Default.Type("observed.instance.state")
	tb := facts.NewTable(nil)
	var keys []string
	for i := 0; i < 600; i++ {
		k := facts.InstanceState(fmt.Sprintf("%05x", 0xa0000+i))
		tb.Put(facts.Fact{Key: k, Value: []byte(`"pending"`)})
		keys = append(keys, k)
	}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	left := keys
	for len(left) > 7 {
		tb.Delete(left[0])
		left = left[1:]
		if len(left)%97 == 0 || len(left) < 20 {
			got := visited(t, func(fn func(facts.Fact) bool) { tb.OfType(state, fn) })
			byValue := visited(t, func(fn func(facts.Fact) bool) { tb.ByValue(state, "pending", fn) })
			if !equalSets(got, left) || !equalSets(byValue, left) || tb.CountOfType(state) != len(left) || tb.CountByValue(state, "pending") != len(left) {
				t.Fatalf("%d left: OfType found %d, ByValue %d", len(left), len(got), len(byValue))
			}
		}
	}
}
