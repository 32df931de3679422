package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// The inputs that used to crash the control plane, through the real
// binary: each is refused with a diagnostic naming the limit, nothing is
// written, and the server keeps running and converging.

// nestedRuleFile is the 150 KB rule file whose nesting overflowed the
// parser's stack.
func nestedRuleFile() string {
	return "rule \"deep\" {\n  doc       = \"Nests past any parser's stack.\"\n  principal = \"network\"\n  when      = " +
		strings.Repeat("[", 150000) + "\n}\n"
}

func TestHostileFilesRefused(t *testing.T) {
	dir := t.TempDir()
	t.Run("rules check of the 150 KB nested rule file", func(t *testing.T) {
		rdir := t.TempDir()
		writeFile(t, rdir, "deep.hcl", nestedRuleFile())
		r := run(t, "rules", "check", rdir)
		if r.code != 1 || !strings.Contains(r.stderr, filepath.Join(rdir, "deep.hcl")+":4:") ||
			!strings.Contains(r.stderr, "File nests deeper than 100 levels (MaxNestingDepth)") {
			t.Fatalf("rules check: exit %d\nstdout:\n%s\nstderr:\n%.3000s", r.code, r.stdout, r.stderr)
		}
		if len(r.stderr) > 4000 {
			t.Errorf("the diagnostics are %d bytes: they repeat the line", len(r.stderr))
		}
	})

	srv, _ := newEngineServer(t)
	cases := []struct {
		name, file, src string
		want            []string // in stderr
	}{
		{"100,000 nested brackets", "deep.hcl",
			"service \"web\" {\n  image     = \"nginx:1.28\"\n  instances = " + strings.Repeat("[", 100000) + "\n}\n",
			[]string{":3:114: error: File nests deeper than 100 levels (MaxNestingDepth)", "Flatten the expression or split it."}},
		{"a billion instances", "billion.hcl",
			"service \"web\" {\n  image     = \"nginx:1.28\"\n  instances = 1000000000\n}\n",
			[]string{":3:15: error: instances = 1000000000 is over the limit of 10000 instances (MaxInstances)", "Ask for fewer"}},
		{"a right-to-left override in the image", "bidi.hcl",
			"service \"web\" {\n  image     = \"nginx\u202e82.1:\"\n  instances = 1\n}\n",
			[]string{":2:21: error: Character U+202E not allowed in \"image\"", "RIGHT-TO-LEFT OVERRIDE"}},
		{"a 5 MB image", "huge.hcl",
			"service \"web\" {\n  image     = \"" + strings.Repeat("a", 5<<20) + "\"\n  instances = 1\n}\n",
			[]string{": error: File larger than 262144 bytes (MaxFileBytes)", "Split it into several files."}},
		{"a 2 KB image", "long.hcl",
			"service \"web\" {\n  image     = \"" + strings.Repeat("a", 2048) + "\"\n  instances = 1\n}\n",
			[]string{":2:1040: error: image of 2048 bytes is over the limit of 1024 (MaxImageBytes)"}},
	}
	for _, tc := range cases {
		t.Run("apply of "+tc.name, func(t *testing.T) {
			p := writeFile(t, dir, tc.file, tc.src)
			var r result
			// The server's own status and election keys lie outside the
			// facts' root; no fact may change.
			for _, k := range writesDuring(t, srv, func() { r = srv.ccattler(t, "apply", "-f", p) }) {
				if strings.HasPrefix(k, "/ccattler/") {
					t.Errorf("a refused apply wrote %s", k)
				}
			}
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			for _, want := range append(tc.want, p, "nothing was written") {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr lacks %q:\n%.3000s", want, r.stderr)
				}
			}
			if len(r.stderr) > 4000 || strings.ContainsRune(r.stderr, '\u202e') {
				t.Errorf("the diagnostics are %d bytes or hold the override:\n%.3000q", len(r.stderr), r.stderr)
			}
		})
	}
	t.Run("apply of an endless file", func(t *testing.T) {
		r := srv.ccattler(t, "apply", "-f", "/dev/zero")
		if r.code != 1 || !strings.Contains(r.stderr, "/dev/zero:1:262145: error: File larger than 262144 bytes (MaxFileBytes)") {
			t.Errorf("exit %d\n%.3000s", r.code, r.stderr)
		}
	})
	if vals, _, _ := srv.factsUnder(t, "desired/"); len(vals) > 0 {
		t.Errorf("desired facts after refused applies: %v", vals)
	}
}

// A watching server refuses the nested rule file like any bad rule set,
// keeps its rules, and goes on converging; a 10 MB value written straight
// to etcd neither crashes it nor lands whole in its log.
func TestHostileInputKeepsServerRunning(t *testing.T) {
	pdir := policyCopy(t, nil)
	srv, _ := newEngineServer(t, "--policies", pdir, "--watch")
	v0 := versionOf(t, pdir)
	startSimNodes(t, srv, 2, "h-")

	writeFile(t, pdir, "deep.hcl", nestedRuleFile())
	waitUntil(t, 30*time.Second, "the nested rule file rejected", func() bool {
		rej, _ := statusJSON(t, srv)["last_rejected"].(map[string]any)
		return rej != nil && strings.Contains(fmt.Sprint(rej["diagnostics"]), "MaxNestingDepth")
	})
	if st := statusJSON(t, srv); st["version"] != v0 || st["reloads"] != 0.0 {
		t.Errorf("status after the rejected file: %v; want version %s, no reload", st, v0)
	}

	st := srv.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// 10 MB where a rogue node may write (an instance's report), where an
	// admin may (auth/), and as the image of a service a user declared
	// past apply.
	huge := `"` + strings.Repeat("a", 10<<20) + `"`
	for _, kv := range [][2]string{
		{"observed/instance/fffff/image", huge}, {"auth/mallory/rules", huge},
		{"desired/service/rogue", "{}"}, {"desired/service/rogue/instances", "1"},
		{"intent/user/service/rogue/instances", "1"}, {"desired/service/rogue/image", huge},
	} {
		if _, err := etcdtest.PutRaw(ctx, st, kv[0], kv[1]); err != nil {
			t.Fatalf("put %d bytes at %s: %v", len(kv[1]), kv[0], err)
		}
	}

	svc := t.TempDir()
	srv.ok(t, "apply", "-f", serviceFile(t, svc, "after", 2))
	waitFleet(t, srv, "after", 2)
	select {
	case <-srv.exited:
		t.Fatalf("the server exited with %d:\n%.5000s", srv.exitCode, srv.logText())
	default:
	}
	// The agents decode the image through the schema: none starts the
	// rogue service's instances with it (they fail), or reports it back.
	obs, _, _ := srv.factsUnder(t, "observed/instance/")
	for k, v := range obs {
		if strings.HasSuffix(k, "/image") && k != "observed/instance/fffff/image" && len(v) > facts.MaxImageBytes+2 {
			t.Errorf("%s reports an image of %d bytes", k, len(v))
		}
	}
	rogue := readFleet(t, srv, "rogue")
	if rogue.running() > 0 {
		t.Errorf("%d instances of the service with a 10 MB image run", rogue.running())
	}
	t.Logf("the service with a 10 MB image has %d instances, none running", len(rogue.state))
	if n := len(srv.logText()); n > 1<<20 {
		t.Errorf("the server's log is %d bytes: a 10 MB value was logged whole", n)
	}
	if err := os.Remove(filepath.Join(pdir, "deep.hcl")); err != nil {
		t.Fatal(err)
	}
}
