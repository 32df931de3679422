package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts/etcdtest"
)

const webExample = "../../examples/web.hcl"

// TestEndToEnd drives one server through the user's commands, in order:
// each step starts from the state the previous one left.
func TestEndToEnd(t *testing.T) {
	srv := newServer(t, t.TempDir())
	dir := t.TempDir()
	// The specs and intents users write; desired/history/ (the applies'
	// history, for rollback) is checked on its own.
	userTrees := []string{"desired/service/", "desired/volume/", "intent/"}

	t.Run("dry run writes nothing", func(t *testing.T) {
		_, _, before := srv.factsUnder(t, "")
		out := srv.ok(t, "apply", "-f", webExample, "--dry-run")
		if !strings.Contains(out, `+ desired/service/web/image = "nginx:1.28"`) || !strings.Contains(out, "dry run: 5 changes, nothing written") {
			t.Errorf("dry run output:\n%s", out)
		}
		vals, _, after := srv.factsUnder(t, userTrees...)
		if after != before || len(vals) != 0 {
			t.Errorf("dry run wrote: revision %d -> %d, facts %v", before, after, vals)
		}
	})

	var applyRev int64
	t.Run("apply the seed example", func(t *testing.T) {
		srv.ok(t, "apply", "-f", webExample)
		vals, revs, _ := srv.factsUnder(t, userTrees...)
		want := map[string]string{ // the key schema's worked example, step 1
			"desired/service/web":               `{}`,
			"desired/service/web/image":         `"nginx:1.28"`,
			"desired/service/web/instances":     `3`,
			"desired/service/web/expose/8080":   `{}`,
			"intent/user/service/web/instances": `3`,
		}
		if fmt.Sprint(vals) != fmt.Sprint(want) {
			t.Fatalf("facts after apply:\n%v\nwant exactly:\n%v", vals, want)
		}
		// One transaction: every key carries the same revision.
		for k, r := range revs {
			if applyRev == 0 {
				applyRev = r
			}
			if r != applyRev {
				t.Errorf("%s written at revision %d, others at %d: not one transaction", k, r, applyRev)
			}
		}
		hist, hrevs, _ := srv.factsUnder(t, "desired/history/service/web/")
		if len(hist) != 1 {
			t.Fatalf("history after one apply: %v", hist)
		}
		for k, r := range hrevs {
			if r != applyRev {
				t.Errorf("%s written at revision %d, the apply at %d: not in its transaction", k, r, applyRev)
			}
		}
	})

	t.Run("re-apply writes nothing", func(t *testing.T) {
		_, _, before := srv.factsUnder(t, "")
		out := srv.ok(t, "apply", "-f", webExample)
		if strings.TrimSpace(out) != "no changes" {
			t.Errorf("re-apply printed:\n%s", out)
		}
		if _, _, after := srv.factsUnder(t, ""); after != before {
			t.Errorf("etcd revision moved from %d to %d on an unchanged apply", before, after)
		}
	})

	t.Run("a dropped port is removed", func(t *testing.T) {
		two := writeFile(t, dir, "web2.hcl", "service \"web\" {\n  image = \"nginx:1.28\"\n  instances = 3\n  expose = [8080, 9090]\n}\n")
		out := srv.ok(t, "apply", "-f", two)
		if !strings.Contains(out, "+ desired/service/web/expose/9090 = {}") {
			t.Fatalf("adding a port printed:\n%s", out)
		}
		out = srv.ok(t, "apply", "-f", webExample)
		if !strings.HasPrefix(out, "- desired/service/web/expose/9090 (was {})\n1 change written at revision ") {
			t.Errorf("dropping a port printed:\n%s", out)
		}
		vals, _, _ := srv.factsUnder(t, "desired/service/web/expose/")
		if len(vals) != 1 || vals["desired/service/web/expose/8080"] != "{}" {
			t.Errorf("exposed ports after dropping 9090: %v", vals)
		}
	})

	t.Run("bad files are rejected with file:line:col and nothing is written", func(t *testing.T) {
		cases := []struct{ name, src, want string }{
			{"negative.hcl", "service \"web\" {\n  instances = -1\n}\n", "negative.hcl:2:15: error: Invalid value for \"instances\""},
			{"memory.hcl", "service \"web\" {\n  resources { memory = \"12XB\" }\n}\n", "memory.hcl:2:24: error: Invalid value for \"memory\""},
			{"syntax.hcl", "service \"web\" {\n  image = = \"x\"\n}\n", "syntax.hcl:2:11: error: Invalid expression"},
			{"typo.hcl", "service \"web\" {\n  imag = \"x\"\n}\n", `Did you mean "image"?`},
			{"port.hcl", "service \"web\" {\n  expose = [8080, 70000]\n}\n", "port.hcl:2:19: error: Invalid port"},
			{"range.hcl", "service \"web\" {\n  autoscale { min = 5  max = 2 }\n}\n", "range.hcl:2:21: error: Invalid autoscale range"},
			{"name.hcl", "service \"we/b\" {}\n", "name.hcl:1:9: error: Invalid service name"},
			{"noimage.hcl", "service \"api\" {\n  instances = 2\n}\n", "noimage.hcl:1:9: error: Missing image"},
			{"novolume.hcl", "service \"db\" {\n  image  = \"pg:16\"\n  volume = \"nowhere\"\n}\n", "novolume.hcl:3:12: error: Undeclared volume"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, _, before := srv.factsUnder(t, "")
				// A good file next to the bad one must not be written either.
				r := srv.ccattler(t, "apply", "-f", webExample, "-f", writeFile(t, dir, tc.name, tc.src))
				if r.code != 1 {
					t.Fatalf("exit %d, want 1; stderr:\n%s", r.code, r.stderr)
				}
				if !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "nothing was written") {
					t.Errorf("stderr lacks %q:\n%s", tc.want, r.stderr)
				}
				if _, _, after := srv.factsUnder(t, ""); after != before {
					t.Errorf("a rejected apply moved the revision from %d to %d", before, after)
				}
			})
		}
	})

	t.Run("a directory is its *.hcl files, checked together", func(t *testing.T) {
		sub := t.TempDir()
		writeFile(t, sub, "a.hcl", "service \"web\" {\n  instances = 3\n}\n")
		writeFile(t, sub, "b.hcl", "volume \"data\" {}\n\nservice \"web\" {}\n")
		r := srv.ccattler(t, "apply", "-f", sub)
		want := sub + `/b.hcl:3:9: error: Duplicate service "web"`
		if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "already declared at "+sub+"/a.hcl:1:9.") {
			t.Errorf("exit %d, stderr:\n%s\nwant it to contain %q", r.code, r.stderr, want)
		}
	})

	t.Run("json output", func(t *testing.T) {
		var res struct {
			DryRun   bool  `json:"dry_run"`
			Written  bool  `json:"written"`
			Revision int64 `json:"revision"`
			Changes  []struct {
				Op  string          `json:"op"`
				Key string          `json:"key"`
				Old json.RawMessage `json:"old"`
				New json.RawMessage `json:"new"`
			} `json:"changes"`
		}
		two := writeFile(t, dir, "web3.hcl", "service \"web\" {\n  image = \"nginx:1.29\"\n  instances = 3\n  expose = [8080]\n}\n")
		out := srv.ok(t, "apply", "-f", two, "--dry-run", "-o", "json")
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if !res.DryRun || res.Written || len(res.Changes) != 1 || res.Changes[0].Op != "change" ||
			res.Changes[0].Key != "desired/service/web/image" || string(res.Changes[0].Old) != `"nginx:1.28"` || string(res.Changes[0].New) != `"nginx:1.29"` {
			t.Errorf("apply --dry-run -o json:\n%s", out)
		}
	})

	t.Run("get services", func(t *testing.T) {
		out := srv.ok(t, "get", "services")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME IMAGE DESIRED EFFECTIVE RUNNING HEALTHY PORTS UPDATED ROLLOUT STATUS FAILURES REASON" ||
			strings.Join(strings.Fields(lines[1]), " ") != "web nginx:1.28 3 - 0 0 8080 0/3 - - - -" {
			t.Errorf("get services:\n%s", out)
		}
		// -o json is typed (docs/cli.md): counts are numbers, ports a list.
		var rows []serviceJSON
		if err := json.Unmarshal([]byte(srv.ok(t, "get", "service", "-o", "json")), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Name != "web" || rows[0].Image != "nginx:1.28" || rows[0].Desired == nil || *rows[0].Desired != 3 ||
			rows[0].Effective != nil || *rows[0].Target != 3 || len(rows[0].Ports) != 1 || rows[0].Ports[0] != 8080 || rows[0].Updated != 0 || rows[0].Running != 0 {
			t.Errorf("get service -o json: %+v", rows)
		}
	})

	t.Run("a server with --etcd uses that cluster", func(t *testing.T) {
		other := startServer(t, "--etcd", srv.client, "--data-dir", t.TempDir())
		if strings.Contains(other.logText(), "embedded etcd ready") {
			t.Errorf("a server given --etcd started its own etcd:\n%s", other.logText())
		}
		if d := other.stop(t); other.exitCode != 0 {
			t.Errorf("exit %d after %s:\n%s", other.exitCode, d, other.logText())
		}
	})

	t.Run("delete service", func(t *testing.T) {
		out := srv.ok(t, "delete", "service", "web")
		if !strings.Contains(out, "- intent/user/service/web/instances (was 3)") || !strings.Contains(out, "5 changes written") {
			t.Errorf("delete printed:\n%s", out)
		}
		if vals, _, _ := srv.factsUnder(t, userTrees...); len(vals) != 0 {
			t.Errorf("facts left after delete: %v", vals)
		}
		if r := srv.ccattler(t, "delete", "service", "web"); r.code != 1 || !strings.Contains(r.stderr, `service "web" not found`) {
			t.Errorf("deleting a missing service: exit %d, stderr %s", r.code, r.stderr)
		}
		if r := srv.ccattler(t, "delete", "nodes", "web"); r.code != 2 {
			t.Errorf("delete of an unknown kind: exit %d, want 2 (usage)", r.code)
		}
	})
}

// TestServerRestartKeepsData stops a server with SIGINT, checks that it
// exits 0 promptly, and starts it again on the same data.
func TestServerRestartKeepsData(t *testing.T) {
	data := t.TempDir()
	srv := newServer(t, data)
	srv.ok(t, "apply", "-f", webExample)
	took := srv.stop(t)
	if srv.exitCode != 0 {
		t.Fatalf("server exited %d on SIGINT:\n%s", srv.exitCode, srv.logText())
	}
	if took > 10*time.Second {
		t.Errorf("server took %s to exit on SIGINT", took)
	}
	if !strings.Contains(srv.logText(), `msg="shutting down"`) {
		t.Errorf("no shutdown line in the log:\n%s", srv.logText())
	}

	again := newServer(t, data) // same data, new ports
	vals, _, _ := again.factsUnder(t, "desired/service/web")
	if vals["desired/service/web/image"] != `"nginx:1.28"` || len(vals) != 4 {
		t.Errorf("after restart: %v", vals)
	}
	if !strings.Contains(again.logText(), "written=0") {
		t.Errorf("restart re-registered fact types it already had:\n%s", again.logText())
	}
}

// TestUnreachableEtcd: a client and a server given an etcd that does not
// answer fail after the dial timeout, naming the endpoint.
func TestUnreachableEtcd(t *testing.T) {
	url := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	for _, args := range [][]string{
		{"get", "services"},
		{"apply", "-f", webExample},
		{"server", "--data-dir", t.TempDir()},
	} {
		t.Run(args[0], func(t *testing.T) {
			r := run(t, append([]string{"--etcd", url, "--dial-timeout", "1s"}, args...)...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\nstderr: %s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, url) || !strings.Contains(r.stderr, "did not answer within 1s") {
				t.Errorf("error does not name the endpoint and the wait:\n%s", r.stderr)
			}
			if r.took > 10*time.Second {
				t.Errorf("took %s to give up with a 1s dial timeout", r.took)
			}
		})
	}
}
