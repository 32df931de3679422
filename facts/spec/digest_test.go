package spec

import (
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
)

// digestOf decodes one service and returns its spec_digest fact's value,
// "" when it has none.
func digestOf(t *testing.T, body string) string {
	t.Helper()
	doc := mustDecode(t, "service \"web\" {\n  image = \"web:1\"\n"+body+"}\n")
	for _, f := range doc.Facts() {
		if f.Key == facts.ServiceSpecDigest("web") {
			if _, err := facts.Default.Validate(f.Key, f.Value); err != nil {
				t.Fatalf("the digest does not validate: %v", err)
			}
			return string(f.Value)
		}
	}
	return ""
}

func TestSpecDigest(t *testing.T) {
	base := `  command = ["/bin/sh", "-c"]
  args    = ["echo $A"]
  env     = { A = "1", B = "2" }
  labels  = { team = "core" }
`
	d := digestOf(t, base)
	if d == "" {
		t.Fatal("a service with command, args, env and labels has no spec_digest")
	}
	same := []struct{ name, body string }{
		{"the same file", base},
		{"the env written in another order", strings.Replace(base, `{ A = "1", B = "2" }`, `{ B = "2", A = "1" }`, 1)},
		{"another image, count and resources (compared by the rollout itself)",
			base + "  instances = 4\n  resources { cpu = 0.5 }\n"},
	}
	for _, tc := range same {
		if got := digestOf(t, tc.body); got != d {
			t.Errorf("%s: digest %s, want %s", tc.name, got, d)
		}
	}
	other := []struct{ name, body string }{
		{"an env value", strings.Replace(base, `A = "1"`, `A = "3"`, 1)},
		{"an env entry more", strings.Replace(base, `B = "2"`, `B = "2", C = ""`, 1)},
		{"an env entry less", strings.Replace(base, `, B = "2"`, ``, 1)},
		{"an env name", strings.Replace(base, `A = "1"`, `AA = "1"`, 1)},
		{"the command", strings.Replace(base, `"-c"`, `"-ec"`, 1)},
		{"the args", strings.Replace(base, `echo $A`, `echo $B`, 1)},
		{"an argument moved from args to the command", strings.Replace(strings.Replace(base, `"-c"]`, `"-c", "echo $A"]`, 1), `args    = ["echo $A"]`, `args = []`, 1)},
		{"a label", strings.Replace(base, `"core"`, `"edge"`, 1)},
		{"an env entry that is a label instead", strings.Replace(strings.Replace(base, `, B = "2"`, ``, 1), `team = "core"`, `team = "core", B = "2"`, 1)},
	}
	seen := map[string]string{d: "the base"}
	for _, tc := range other {
		got := digestOf(t, tc.body)
		if got == "" {
			t.Errorf("%s: no digest", tc.name)
			continue
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: digest %s, the same as %s", tc.name, got, prev)
		}
		seen[got] = tc.name
	}
	// A service that sets none of the four keeps exactly the key schema's
	// facts (seed/etcd-key-schema.txt, the worked example).
	if got := digestOf(t, "  instances = 3\n  expose = [8080]\n"); got != "" {
		t.Errorf("a service without command, args, env or labels has spec_digest %s", got)
	}
}

func TestSpecDigestIsNotAnAttribute(t *testing.T) {
	// Only apply computes it: a file that sets it is refused like any
	// unknown attribute, so it cannot disagree with what it summarizes.
	_, msgs := decodeOne(t, "f.hcl", "service \"web\" {\n  image = \"x:1\"\n  spec_digest = \"0123456789abcdef\"\n}\n")
	if len(msgs) == 0 {
		t.Fatal("a file that sets spec_digest was accepted")
	}
	t.Log(msgs)
}
