package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// TestAuditLifecycle runs the key schema's lifecycle example (three
// simulated nodes, examples/web.hcl) on the default policies and checks
// what an auditor sees: the whole `why` chain of an endpoint, as text and as
// JSON, and `events --follow` printing a firing right after its write.
func TestAuditLifecycle(t *testing.T) {
	srv, _ := newEngineServer(t)
	startSimNodes(t, srv, 3, "node-")
	srv.ok(t, "apply", "-f", webExample)
	var eps map[string]string
	waitUntil(t, 30*time.Second, "3 endpoints of web", func() bool {
		eps, _, _ = srv.factsUnder(t, "endpoint/service/web/")
		return len(eps) == 3
	})
	// The server's clock (observed/clock, a fact without an id) sits among
	// the observed facts `get` reads.
	waitUntil(t, 10*time.Second, "get services shows web converged", func() bool {
		lines := strings.Split(strings.TrimSpace(srv.ok(t, "get", "services")), "\n")
		return len(lines) == 2 && strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " ")+" ", "web nginx:1.28 3 3 3 3 8080 ")
	})
	var key, id string
	for k := range eps {
		key, id = k, strings.TrimPrefix(k, "endpoint/service/web/")
		break
	}

	// The chain, root first: each step's fact, the origin that explains it
	// and a piece of the explanation.
	chain := []struct{ key, value, origin, explain string }{
		{key, "", "rule", "rule publish_endpoint"},
		{"observed/instance/" + id + "/state", `"running"`, "agent", "reported by the agent of node-"},
		{"placement/instance/" + id, "", "rule", "rule schedule"},
		{"observed/instance/" + id + "/state", `"pending"`, "rule", "rule create_instances"},
		{"effective/service/web/instances", "3", "rule", "rule resolve_intent"},
		{"intent/user/service/web/instances", "3", "apply", "applied by"},
	}

	t.Run("the built-in policies reload unchanged", func(t *testing.T) {
		st := statusJSON(t, srv)
		if st["source"] != "(built-in default policies)" || len(st["files"].([]any)) == 0 {
			t.Errorf("status of a server on the built-in policies: %v", st)
		}
		if out := srv.ok(t, "rules", "reload"); !strings.Contains(out, fmt.Sprintf("server-1: unchanged, %s", st["version"])) {
			t.Errorf("rules reload:\n%s", out)
		}
	})

	t.Run("text", func(t *testing.T) {
		out := srv.ok(t, "why", key)
		// Parse the tree: depth from the drawing's width, children under
		// their parent; a fact shared by two branches is drawn in full once
		// and "(explained above)" after, so follow it to its full drawing.
		type line struct {
			text     string
			children []int
		}
		var ls []line
		var stack []int // index of the latest line at each depth
		first := map[string]int{}
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			trimmed := strings.TrimLeft(l, "│├└─ ")
			d := (len([]rune(l)) - len([]rune(trimmed))) / 3
			i := len(ls)
			ls = append(ls, line{text: trimmed})
			if d > len(stack) {
				t.Fatalf("line %q is deeper than its parent:\n%s", l, out)
			}
			stack = append(stack[:d], i)
			if d > 0 {
				ls[stack[d-1]].children = append(ls[stack[d-1]].children, i)
			}
			if head, _, ok := strings.Cut(trimmed, "  ← "); ok && !strings.HasSuffix(trimmed, "(explained above)") {
				if _, seen := first[head]; !seen {
					first[head] = i
				}
			}
		}
		resolve := func(i int) int {
			if strings.HasSuffix(ls[i].text, "(explained above)") {
				head, _, _ := strings.Cut(ls[i].text, "  ← ")
				return first[head]
			}
			return i
		}
		step := func(i, s int) bool {
			c := chain[s]
			return strings.HasPrefix(ls[i].text, c.key+" = "+c.value) && strings.Contains(ls[i].text, c.explain)
		}
		if len(ls) == 0 || !step(0, 0) {
			t.Fatalf("why %s does not start with %+v:\n%s", key, chain[0], out)
		}
		cur := 0
		for s := 1; s < len(chain); s++ {
			next := -1
			for _, c := range ls[resolve(cur)].children {
				if step(c, s) {
					next = c
				}
			}
			if next < 0 {
				t.Fatalf("why %s: no line %s = %s ← %s under %q:\n%s", key, chain[s].key, chain[s].value, chain[s].explain, ls[cur].text, out)
			}
			cur = next
		}
	})

	t.Run("json", func(t *testing.T) {
		var g struct {
			Root  string `json:"root"`
			Nodes []struct {
				ID, Key, Origin, Explain, Rule string
				Value                          json.RawMessage
			} `json:"nodes"`
			Edges []struct{ From, To string } `json:"edges"`
		}
		out := srv.ok(t, "why", key, "-o", "json")
		if err := json.Unmarshal([]byte(out), &g); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		byID := map[string]int{}
		for i, n := range g.Nodes {
			byID[n.ID] = i
		}
		edges := map[string][]string{}
		for _, e := range g.Edges {
			edges[e.From] = append(edges[e.From], e.To)
		}
		matches := func(id string, i int) bool {
			n := g.Nodes[byID[id]]
			s := chain[i]
			return n.Key == s.key && (s.value == "" || string(n.Value) == s.value) && n.Origin == s.origin && strings.Contains(n.Explain, s.explain)
		}
		cur := g.Root
		if !matches(cur, 0) {
			t.Fatalf("root %s is not %+v:\n%s", cur, chain[0], out)
		}
		for i := 1; i < len(chain); i++ {
			next := ""
			for _, to := range edges[cur] {
				if matches(to, i) {
					next = to
				}
			}
			if next == "" {
				t.Fatalf("no edge from %s to %+v; edges: %v\n%s", cur, chain[i], edges[cur], out)
			}
			cur = next
		}
		if r := g.Nodes[byID[g.Root]].Rule; r != "publish_endpoint" {
			t.Errorf("root rule %q", r)
		}
	})

	t.Run("events --follow shows a firing within a second", func(t *testing.T) {
		cmd := exec.Command(bin, append(srv.flags(), "events", "--follow", "--rule", "resolve_intent", "-o", "json")...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		type seen struct {
			ev struct {
				ID     string `json:"id"`
				Writes []struct {
					Key   string          `json:"key"`
					Value json.RawMessage `json:"value"`
				} `json:"writes"`
			}
			at time.Time
		}
		lines := make(chan seen, 16)
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				var s seen
				s.at = time.Now()
				if json.Unmarshal(sc.Bytes(), &s.ev) == nil {
					lines <- s
				}
			}
			close(lines)
		}()
		// The record of the first resolution comes first: the follow is up.
		select {
		case <-lines:
		case <-time.After(10 * time.Second):
			t.Fatal("events --follow printed nothing of the existing records")
		}
		srv.ok(t, "apply", "-f", writeFile(t, t.TempDir(), "web4.hcl",
			"service \"web\" {\n  image = \"nginx:1.28\"\n  instances = 4\n  expose = [8080]\n}\n"))
		applied := time.Now()
		for {
			select {
			case s, ok := <-lines:
				if !ok {
					t.Fatal("events --follow ended")
				}
				if len(s.ev.Writes) == 0 || string(s.ev.Writes[0].Value) != "4" {
					continue
				}
				written, ok := facts.EventTime(s.ev.ID)
				if !ok {
					t.Fatalf("event id %q has no time", s.ev.ID)
				}
				if lag := s.at.Sub(written); lag > time.Second {
					t.Errorf("the firing committed at %s was printed %s later", written.Format(time.RFC3339Nano), lag)
				}
				t.Logf("firing printed %s after its commit, %s after the apply returned", s.at.Sub(written), s.at.Sub(applied))
				return
			case <-time.After(5 * time.Second):
				t.Fatal(fmt.Sprintf("no resolve_intent firing for 4 instances within 5s of the apply"))
			}
		}
	})
}
