package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestCLIE2E runs get (names, filters, typed output, watch), describe,
// events --limit/--rule, version and the completions through the real
// binary against a server with the engine and two simulated nodes: "web"
// runs, labelled; "big" asks for more cpu than any node has and stays
// pending.
func TestCLIE2E(t *testing.T) {
	srv, _ := newEngineServer(t)
	startSimNodes(t, srv, 2, "cli-")
	dir := t.TempDir()
	svc := func(n int) string {
		return writeFile(t, dir, fmt.Sprintf("web%d.hcl", n), fmt.Sprintf(`service "web" {
  image     = "nginx:1.28"
  instances = %d
  expose    = [8080]
  labels    = { tier = "front" }
  resources {
    cpu    = 0.5
    memory = "512Mi"
  }
}
`, n))
	}
	big := writeFile(t, dir, "big.hcl", "service \"big\" {\n  image     = \"nginx:1.28\"\n  instances = 1\n  resources {\n    cpu    = 64\n    memory = \"64Mi\"\n  }\n}\n")
	srv.ok(t, "apply", "-f", svc(2), "-f", big)
	web := waitFleet(t, srv, "web", 2)
	var bigID string
	waitUntil(t, 30*time.Second, "big's instance pending with a rejection", func() bool {
		f := readFleet(t, srv, "big")
		for id := range f.state {
			bigID = id
		}
		return bigID != "" && srv.ccattler(t, "why-not", "instance", bigID).code == 0
	})

	t.Run("get -o json is typed", func(t *testing.T) {
		var rows []map[string]any
		if err := json.Unmarshal([]byte(srv.ok(t, "get", "services", "web", "-o", "json")), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0]["name"] != "web" || rows[0]["desired"] != 2.0 || rows[0]["cpu"] != 0.5 ||
			rows[0]["memory"] != float64(512<<20) || fmt.Sprint(rows[0]["ports"]) != "[8080]" ||
			fmt.Sprint(rows[0]["labels"]) != "map[tier:front]" {
			t.Errorf("get services web -o json: %v", rows)
		}
		var nodes []nodeJSON
		if err := json.Unmarshal([]byte(srv.ok(t, "get", "nodes", "-o", "json")), &nodes); err != nil {
			t.Fatal(err)
		}
		if len(nodes) != 2 || *nodes[0].Memory.Capacity != 16<<30 || *nodes[0].CPU.Capacity != 8 {
			t.Errorf("get nodes -o json: %s", srv.ok(t, "get", "nodes", "-o", "json"))
		}
		var insts []instanceJSON
		if err := json.Unmarshal([]byte(srv.ok(t, "get", "instances", "--service", "web", "-o", "json")), &insts); err != nil {
			t.Fatal(err)
		}
		for _, in := range insts {
			if in.StartedAt == nil || in.AgeSeconds == nil || *in.AgeSeconds < 0 || in.StartedAt.After(time.Now()) {
				t.Errorf("running instance without a start time or age: %+v", in)
			}
		}
		// -o yaml is the same document.
		y := srv.ok(t, "get", "services", "-o", "yaml")
		j, err := yaml.YAMLToJSON([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		var fromYAML []serviceJSON
		if err := json.Unmarshal(j, &fromYAML); err != nil || len(fromYAML) != 2 || fromYAML[1].Name != "web" || *fromYAML[1].Desired != 2 {
			t.Errorf("get services -o yaml (%v):\n%s", err, y)
		}
	})

	t.Run("names and filters", func(t *testing.T) {
		r := srv.ccattler(t, "get", "services", "web", "nope", "gone")
		if r.code != 1 || !strings.Contains(r.stdout, "web") || strings.Contains(r.stdout, "big") ||
			!strings.Contains(r.stderr, `service "nope", "gone" not found`) {
			t.Errorf("get services web nope gone: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		// A table without rows says why on stderr; typed output does not.
		for _, tc := range []struct {
			args   []string
			stderr string
		}{
			{[]string{"get", "volumes"}, "no volumes\n"},
			{[]string{"get", "instances", "--state", "failed", "-o", "wide"}, "no instances match the filters\n"},
			{[]string{"get", "instances", "--state", "failed", "-o", "json"}, ""},
		} {
			if r := srv.ccattler(t, tc.args...); r.code != 0 || r.stderr != tc.stderr || strings.Count(r.stdout, "\n") != 1 {
				t.Errorf("%s: exit %d, stderr %q (want %q), stdout %q (want a heading alone, or [])", strings.Join(tc.args, " "), r.code, r.stderr, tc.stderr, r.stdout)
			}
		}
		names := strings.Fields(srv.ok(t, "get", "instances", "--state", "running", "--service", "web", "-o", "name"))
		var want []string
		for id := range web.state {
			want = append(want, "instance/"+id)
		}
		slices.Sort(names)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("get instances --state running --service web -o name: %v, want %v", names, want)
		}
		if out := srv.ok(t, "get", "instances", "--state", "pending", "-o", "name"); strings.TrimSpace(out) != "instance/"+bigID {
			t.Errorf("get instances --state pending: %q, want instance/%s", out, bigID)
		}
		if out := srv.ok(t, "get", "instances", "-l", "tier!=front", "-o", "name"); strings.TrimSpace(out) != "instance/"+bigID {
			t.Errorf("get instances -l tier!=front: %q", out)
		}
		if out := srv.ok(t, "get", "services", "-l", "tier=front", "-o", "name"); strings.TrimSpace(out) != "service/web" {
			t.Errorf("get services -l tier=front: %q", out)
		}
		node := web.placement[want[0][len("instance/"):]]
		var onNode []instanceJSON
		if err := json.Unmarshal([]byte(srv.ok(t, "get", "instances", "--node", node, "-o", "json")), &onNode); err != nil {
			t.Fatal(err)
		}
		wantOn := 0
		for _, n := range web.placement {
			if n == node {
				wantOn++
			}
		}
		if len(onNode) != wantOn || slices.ContainsFunc(onNode, func(in instanceJSON) bool { return in.Node != node }) {
			t.Errorf("get instances --node %s: %+v, want the %d there", node, onNode, wantOn)
		}
		wide := srv.ok(t, "get", "instances", "-o", "wide")
		if head := strings.Fields(strings.SplitN(wide, "\n", 2)[0]); strings.Join(head[len(head)-4:], " ") != "CPU MEMORY STARTED REASON" {
			t.Errorf("get instances -o wide:\n%s", wide)
		}
		for _, bad := range [][]string{
			{"get", "instances", "--state", "runing"},
			{"get", "services", "--state", "running"},
			{"get", "nodes", "--service", "web"},
			{"get", "volumes", "-l", "tier=front"},
			{"get", "instances", "-l", "=x"},
			{"get", "services", "a/b"},
			{"get", "services", "-o", "table2"},
			{"describe", "service", "a/b"},
			{"events", "--limit", "-1"},
		} {
			if r := srv.ccattler(t, bad...); r.code != 2 || !strings.Contains(r.stderr, "error:") {
				t.Errorf("ccattler %s: exit %d, want 2\n%s", strings.Join(bad, " "), r.code, r.stderr)
			}
		}
	})

	t.Run("get -w redraws on change", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(srv.flags(), "get", "services", "web", "-w", "-o", "json")...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan []serviceJSON)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var rows []serviceJSON
				if err := json.Unmarshal(sc.Bytes(), &rows); err != nil {
					t.Errorf("a -w -o json line is not a JSON document: %v: %s", err, sc.Text())
				}
				lines <- rows
			}
		}()
		// A table not on a terminal: one view after another, a blank line between.
		table := exec.CommandContext(ctx, bin, append(srv.flags(), "get", "instances", "--service", "web", "-w")...)
		var tableOut syncBuffer
		table.Stdout, table.Stderr = &tableOut, &tableOut
		if err := table.Start(); err != nil {
			t.Fatal(err)
		}
		first := <-lines
		if len(first) != 1 || first[0].Running != 2 {
			t.Fatalf("first snapshot: %+v", first)
		}
		start := time.Now()
		srv.ok(t, "apply", "-f", svc(3))
		snapshots := 1
		for rows := range lines {
			snapshots++
			if len(rows) == 1 && rows[0].Running == 3 {
				break
			}
		}
		took := time.Since(start)
		// Bounded redraws: at most one a second, and each one differs.
		if max := int(took/watchRedrawEvery) + 2; snapshots > max {
			t.Errorf("%d snapshots in %s: more than one a second", snapshots, took)
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		if err := cmd.Wait(); err != nil {
			t.Errorf("get -w after Ctrl-C: %v (want exit 0)\n%s", err, stderr.String())
		}
		var views []string
		runningRow := regexp.MustCompile(`(?m)^\S+\s+web\s+\S+\s+running\b`)
		waitUntil(t, 30*time.Second, "the table view with 3 running instances", func() bool {
			views = strings.Split(strings.TrimSpace(tableOut.String()), "\n\n")
			return len(views) >= 2 && len(runningRow.FindAllString(views[len(views)-1], -1)) == 3
		})
		for _, v := range views {
			if !strings.HasPrefix(v, "ID ") {
				t.Errorf("a view of get instances -w does not start with the heads:\n%s", v)
			}
		}
		_ = table.Process.Signal(syscall.SIGINT)
		if err := table.Wait(); err != nil {
			t.Errorf("get instances -w after Ctrl-C: %v\n%s", err, tableOut.String())
		}
		web = waitFleet(t, srv, "web", 3)
	})

	t.Run("describe", func(t *testing.T) {
		out := srv.ok(t, "describe", "service", "web")
		for _, want := range []string{"Service:", "nginx:1.28", "tier=front", "desired 3", "(intents: user 3)", "3 running",
			"desired/service/web/image", "Endpoints:", "Events (the last 10 of "} {
			if !strings.Contains(out, want) {
				t.Errorf("describe service web lacks %q:\n%s", want, out)
			}
		}
		for id := range web.state {
			if !regexp.MustCompile(`(?m)^  ` + id + `\s+web\s+\S+\s+running\b`).MatchString(out) {
				t.Errorf("describe service web does not show %s running:\n%s", id, out)
			}
		}
		out = srv.ok(t, "describe", "service", "big")
		if !strings.Contains(out, "Why not placed:") || !regexp.MustCompile(`cli-0001\s+rejected by .*cpu`).MatchString(out) {
			t.Errorf("describe service big does not say why its instance is pending:\n%s", out)
		}
		var d description
		if err := json.Unmarshal([]byte(srv.ok(t, "describe", "svc", "big", "-o", "json", "--events", "3")), &d); err != nil {
			t.Fatal(err)
		}
		if d.Service == nil || d.Service.Name != "big" || len(d.Instances) != 1 || len(d.Pending) != 1 ||
			d.Pending[0].Rejection == nil || d.Pending[0].Instance != bigID || len(d.Events) > 3 || d.Matched < len(d.Events) {
			t.Errorf("describe svc big -o json: %+v", d)
		}
		var id string
		for id = range web.state {
			break
		}
		out = srv.ok(t, "describe", "instance", id)
		if !strings.Contains(out, "Instance:  "+id) || !strings.Contains(out, "placement/instance/"+id) || !strings.Contains(out, "running") {
			t.Errorf("describe instance %s:\n%s", id, out)
		}
		out = srv.ok(t, "describe", "node", "cli-0001")
		if !strings.Contains(out, "lease held") || !strings.Contains(out, "observed/node/cli-0001/capacity/cpu") || !strings.Contains(out, "16Gi") {
			t.Errorf("describe node cli-0001:\n%s", out)
		}
		if r := srv.ccattler(t, "describe", "service", "nope"); r.code != 1 || !strings.Contains(r.stderr, `service "nope" not found`) {
			t.Errorf("describe service nope: exit %d: %s", r.code, r.stderr)
		}
		if r := srv.ccattler(t, "describe", "pod", "x"); r.code != 2 || !strings.Contains(r.stderr, `unknown kind "pod"`) {
			t.Errorf("describe pod x: exit %d: %s", r.code, r.stderr)
		}
	})

	t.Run("events --limit and --rule", func(t *testing.T) {
		// Records may be added meanwhile: the two must be consecutive in
		// the list read after them, the newer no older than the newest
		// read before.
		lines := func(args ...string) []string {
			return strings.Split(strings.TrimSpace(srv.ok(t, append([]string{"events", "--rule", "schedule", "-o", "json"}, args...)...)), "\n")
		}
		before := lines()
		two := lines("--limit", "2")
		after := lines()
		i := slices.Index(after, two[len(two)-1])
		if len(before) < 3 || len(two) != 2 || i < len(before)-1 || after[i-1] != two[0] {
			t.Errorf("events --limit 2 printed %d records, not the newest 2 of %d", len(two), len(after))
		}
		r := srv.ccattler(t, "events", "--rule", "schedul")
		if r.code != 2 || !strings.Contains(r.stderr, `--rule "schedul": no record and no default policy names this rule`) ||
			!strings.Contains(r.stderr, "schedule") || !strings.Contains(r.stderr, "publish_endpoint") || r.stdout != "" {
			t.Errorf("events --rule schedul: exit %d\n%s", r.code, r.stderr)
		}
		// A known rule that has not fired is no mistake.
		if r := srv.ccattler(t, "events", "--rule", "detect_zone_disruption"); r.code != 0 {
			t.Errorf("events --rule detect_zone_disruption: exit %d: %s", r.code, r.stderr)
		}
	})

	t.Run("completion from the cluster", func(t *testing.T) {
		complete := func(args ...string) []string {
			out := srv.ok(t, append([]string{"__complete"}, args...)...)
			var words []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, ":") {
					words = append(words, l)
				}
			}
			return words
		}
		if got := complete("get", "services", ""); !slices.Equal(got, []string{"big", "web"}) {
			t.Errorf("get services <TAB>: %v", got)
		}
		if got := complete("get", "services", "web", ""); !slices.Equal(got, []string{"big"}) {
			t.Errorf("get services web <TAB>: %v (a name given is not offered again)", got)
		}
		if got := complete("describe", "node", "cli-"); !slices.Equal(got, []string{"cli-0001", "cli-0002"}) {
			t.Errorf("describe node cli-<TAB>: %v", got)
		}
		if got := complete("why-not", "instance", bigID[:2]); !slices.Contains(got, bigID) {
			t.Errorf("why-not instance %s<TAB>: %v", bigID[:2], got)
		}
		if got := complete("events", "--rule", "sched"); !slices.Equal(got, []string{"schedule"}) {
			t.Errorf("events --rule sched<TAB>: %v", got)
		}
		if got := complete("get", "instances", "--state", ""); !slices.Equal(got, []string{"pending", "running", "failed", "stopped"}) {
			t.Errorf("get instances --state <TAB>: %v", got)
		}
		// A dead cluster offers nothing, quickly: the shell is not held.
		r := run(t, "--etcd", "http://127.0.0.1:1", "__complete", "get", "services", "")
		if r.code != 0 || r.took > 5*time.Second || strings.Contains(r.stdout, "web") {
			t.Errorf("completion against a dead etcd: exit %d after %s:\n%s", r.code, r.took, r.stdout)
		}
	})

	t.Run("version", func(t *testing.T) {
		var v versionInfo
		if err := json.Unmarshal([]byte(srv.ok(t, "version", "-o", "json")), &v); err != nil {
			t.Fatal(err)
		}
		// What the toolchain embedded, read by the toolchain itself.
		mods, err := exec.Command(goBinary(), "version", "-m", bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		for mod, got := range map[string]string{etcdClientModule: v.Etcd, containerdClientModule: v.Containerd} {
			m := regexp.MustCompile(`(?m)^\s+dep\s+` + regexp.QuoteMeta(mod) + `\s+(\S+)`).FindSubmatch(mods)
			if m == nil || got != string(m[1]) {
				t.Errorf("version says %s %q; the binary has %s", mod, got, m)
			}
		}
		if m := regexp.MustCompile(`(?m)^\s+build\s+vcs\.revision=(\S+)`).FindSubmatch(mods); m != nil && v.Commit != string(m[1]) || m == nil && v.Commit != "" {
			t.Errorf("version says commit %q; the binary has %s", v.Commit, m)
		}
		if !strings.HasPrefix(v.Go, "go1.") || v.Version == "" {
			t.Errorf("version: %+v", v)
		}
		if r := run(t, "--version"); r.code != 0 || r.stdout != "ccattler "+v.short()+"\n" {
			t.Errorf("--version: exit %d: %q", r.code, r.stdout)
		}
	})
}

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
