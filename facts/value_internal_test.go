package facts

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestPlainDecodeAgrees: the fast path of Decode accepts and returns exactly
// what encoding/json does, for every built-in value type.
func TestPlainDecodeAgrees(t *testing.T) {
	inputs := []string{`"alive"`, `""`, `"nginx:1.28"`, `"10.1.0.5"`, `"2026-11-29T21:00:00Z"`, `"256Mi"`, `"a\"b"`,
		`"a\\b"`, `"é"`, "\"\x01\"", `"~"`, `0`, `-0`, `7`, `-12`, `007`, `1.5`, `1e3`, `123456789012345678`,
		`1234567890123456789`, `99999999999999999999`, `-`, `""x`, `"`, `{}`, `true`, `null`, ` 3`, `3 `, `[]`}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		b := make([]byte, r.IntN(6))
		for i := range b {
			b[i] = "\"-0123456789ab\\ ."[r.IntN(17)]
		}
		inputs = append(inputs, string(b))
	}
	checked := 0
	for _, ft := range Default.Types() {
		for _, in := range inputs {
			raw := []byte(in)
			if _, ok := plainJSON(raw); !ok {
				continue
			}
			checked++
			fast, ferr := ft.Value.Decode(raw)
			slow, serr := ft.Value.decodeJSON(raw)
			if (ferr == nil) != (serr == nil) || !reflect.DeepEqual(fast, slow) {
				t.Fatalf("%s %s: fast path %#v %v, encoding/json %#v %v", ft.Name, in, fast, ferr, slow, serr)
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d inputs took the fast path", checked)
	}
}
