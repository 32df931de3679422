package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// badArgs are, for the few commands whose arguments are open-ended, an
// argument list they refuse as a usage mistake. Every other command is
// given more arguments than any takes, which it must refuse.
var badArgs = map[string][]string{
	"ccattler image import": {}, // ARCHIVE...: none at all is the mistake
	"ccattler get":          {"no-such-kind"},
	"ccattler delete":       {"no-such-kind", "x"},
	"ccattler describe":     {"no-such-kind", "x"},
}

// TestExitCodesEveryCommand walks the command tree as it is when the test
// runs — so a command added later is covered without a line here — and
// runs the real binary with an unknown flag and with bad arguments: each
// must exit 2 with the mistake on stderr, before asking anything of a
// cluster (--etcd points at a port nothing listens on, and a short
// --dial-timeout would turn a dial into exit 1).
func TestExitCodesEveryCommand(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newRootCmd(), nil)
	if len(paths) < 30 {
		t.Fatalf("walked %d commands: the tree is not what the binary has", len(paths))
	}
	noCluster := []string{"--etcd", "http://127.0.0.1:1", "--dial-timeout", "200ms"}
	for _, path := range paths {
		name := strings.Join(append([]string{"ccattler"}, path...), " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := append(append(append([]string(nil), noCluster...), path...), "--no-such-flag")
			if r := run(t, args...); r.code != 2 || !strings.Contains(r.stderr, "unknown flag: --no-such-flag") {
				t.Errorf("%s --no-such-flag: exit %d, want 2; stderr:\n%s", name, r.code, r.stderr)
			}
			bad, ok := badArgs[name]
			if !ok {
				bad = []string{"bad-arg-1", "bad-arg-2", "bad-arg-3", "bad-arg-4", "bad-arg-5", "bad-arg-6"}
			}
			args = append(append(append([]string(nil), noCluster...), path...), bad...)
			if r := run(t, args...); r.code != 2 || !strings.Contains(r.stderr, "error:") {
				t.Errorf("%s %s: exit %d, want 2; stderr:\n%s", name, strings.Join(bad, " "), r.code, r.stderr)
			}
		})
	}
	t.Run("a bad --log-level value", func(t *testing.T) {
		for _, cmd := range []string{"agent", "server", "dev", "bench"} {
			args := append(append([]string(nil), noCluster...), cmd, "--log-level", "loud")
			r := run(t, args...)
			if r.code != 2 || !strings.Contains(r.stderr, `--log-level "loud": expected debug, info, warn or error`) {
				t.Errorf("%s --log-level loud: exit %d, want 2; stderr:\n%s", cmd, r.code, r.stderr)
			}
		}
	})
	t.Run("a wrong number of arguments shows the form and an example", func(t *testing.T) {
		r := run(t, append(append([]string(nil), noCluster...), "describe", "web")...)
		if r.code != 2 || !strings.Contains(r.stderr, "ccattler describe web: expected ccattler describe service|instance|node NAME, e.g. ccattler describe service web") {
			t.Errorf("describe web: exit %d, want 2 with the form and an example; stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("scale without its kind", func(t *testing.T) {
		r := run(t, append(append([]string(nil), noCluster...), "scale", "web", "5")...)
		if r.code != 2 || !strings.Contains(r.stderr, "expected the kind first: ccattler scale service web 5") {
			t.Errorf("scale web 5: exit %d, want 2 and the command to type; stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("scale to a negative count", func(t *testing.T) {
		// The flag parser sees "-1" first; it is a count, not a flag.
		r := run(t, append(append([]string(nil), noCluster...), "scale", "service", "web", "-1")...)
		if r.code != 2 || !strings.Contains(r.stderr, `scale service web "-1": expected a whole number of instances from 0 to 10000`) {
			t.Errorf("scale service web -1: exit %d, want 2 and the range; stderr:\n%s", r.code, r.stderr)
		}
		if r := run(t, append(append([]string(nil), noCluster...), "scale", "service", "web", "1", "-x")...); r.code != 2 || !strings.Contains(r.stderr, "unknown shorthand flag: 'x' in -x") {
			t.Errorf("scale service web 1 -x: exit %d, want 2 naming the flag; stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("a bad --output value", func(t *testing.T) {
		if r := run(t, append(noCluster, "version", "-o", "xml")...); r.code != 2 || !strings.Contains(r.stderr, `--output "xml": expected table or json`) {
			t.Errorf("version -o xml: exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})
}
