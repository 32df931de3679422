package facts

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestPlainDecodeAgrees: the fast path of Decode accepts and returns exactly
// what encoding/json does, for every built-in value type.
func TestPlainDecodeAgrees(t *testing.T) {
	inputs := []string{`"alive"`, `""`, `"nginx:1.28"`, `"10.1.0.5"`, `"2026-11-29T21:00:00Z"`, `"256Mi"`, `"a\"b"`,
		`"a\\b"`, `"é"`, "\"\x01\"", `"~"`, `0`, `-0`, `7`, `-12`, `007`, `1.5`, `1e3`, `123456789012345678`,
		`1234567890123456789`, `99999999999999999999`, `-`, `""x`, `"`, `{}`, `true`, `null`, ` 3`, `3 `, `[]`,
		`0.1`, `-0.25`, `12.50`, `0.`, `.5`, `01.5`, `1.2.3`, `1.5e3`, `-.5`, `0.000000000000000001`, `123456789.123456789`}
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

// The name and instance-id checks agree with the patterns the schema
// documents, on strings drawn from the characters that matter.
func TestSegmentChecksAgreeWithPatterns(t *testing.T) {
	nameRE := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	instanceRE := regexp.MustCompile(`^[0-9a-f]{5,16}$`)
	alphabet := []rune("abfgz059-A_./ é")
	r := rand.New(rand.NewPCG(3, 4))
	cases := []string{"", "a", "-", "a-", "-a", "a-b", strings.Repeat("a", 63), strings.Repeat("a", 64), "a8f31", "a8f3", strings.Repeat("f", 16), strings.Repeat("f", 17)}
	for range 100000 {
		n := r.IntN(70)
		if r.IntN(2) == 0 {
			n = 3 + r.IntN(16) // around the instance-id lengths
		}
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, s := range cases {
		if got, want := validName(s), nameRE.MatchString(s); got != want {
			t.Fatalf("validName(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := validInstanceID(s), instanceRE.MatchString(s); got != want {
			t.Fatalf("validInstanceID(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
