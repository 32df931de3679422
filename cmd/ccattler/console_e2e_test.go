package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/chromedp/chromedp"
)

// The web console, driven by a real headless Chromium against a real
// secure server with simulated nodes: what the pages show is read from the
// browser's DOM and checked against the CLI's answers.

// screenshotDir is where the console tests write their screenshots
// (CCATTLER_SCREENSHOTS, by default ccattler-console-screenshots in the
// temporary directory); docs/console/ holds copies.
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("CCATTLER_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "ccattler-console-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium for the test. Without one the test
// is skipped, unless CI=true: then a missing browser is a failure.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no chromium on PATH: the console tests need it (apt-get install chromium; .ci/run installs it)")
		}
		t.Skip("no chromium on PATH (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.Flag("no-sandbox", true), // tests run as root in CI containers
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// run runs browser actions with a deadline.
func runIn(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// domEval evaluates a JavaScript expression in the page into v.
func domEval(t *testing.T, ctx context.Context, js string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](js))
	if err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
}

// followLink clicks the link sel finds and waits until the page it points
// to has loaded: waiting for an element alone can find it on the page
// being left, and reading that page mid-navigation reads half a table.
func followLink(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	var href string
	// getAttribute, since an SVG link's href is not a string.
	domEval(t, ctx, fmt.Sprintf(`new URL(document.querySelector(%q).getAttribute("href"), location.href).href`, sel), &href)
	runIn(t, ctx, chromedp.Click(chromedp.CSS(sel)))
	waitUntil(t, 30*time.Second, "the page at "+href+" loaded", func() bool {
		ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// While the page is replaced the evaluation may fail: poll again.
		raw, err := chromedp.Run(ectx, chromedp.Evaluate[[]byte](`[location.href, document.readyState]`))
		var at []string
		return err == nil && json.Unmarshal(raw, &at) == nil && len(at) == 2 && at[0] == href && at[1] == "complete"
	})
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(screenshotDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
}

// tableJS reads the rows of a console table as objects keyed by column.
func tableJS(selector string) string {
	return fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(tr =>
		Object.fromEntries(Array.from(tr.querySelectorAll("td[data-col]")).map(td => [td.dataset.col, td.textContent.trim()])))`,
		selector+" tbody tr[data-key]")
}

type row map[string]string

func byKey(rows []row, col string) map[string]row {
	m := map[string]row{}
	for _, r := range rows {
		m[r[col]] = r
	}
	return m
}

func TestConsole(t *testing.T) {
	srv, admin := newEngineServer(t)
	startSimNodes(t, srv, 3, "node-")
	dir := t.TempDir()
	srv.ok(t, "apply", "-f", webExample)
	srv.ok(t, "apply", "-f", serviceFile(t, dir, "api", 2))
	waitFleet(t, srv, "web", 3)
	waitFleet(t, srv, "api", 2)
	ui := "http://" + admin + "/ui/"
	ctx := browser(t)

	services := func() map[string]row {
		var rows []row
		domEval(t, ctx, tableJS("#cluster table.services"), &rows)
		return byKey(rows, "name")
	}
	t.Run("cluster", func(t *testing.T) {
		runIn(t, ctx, chromedp.Navigate(ui))
		// The page shows the mirror's state when it loaded; the health
		// policy's last writes may still be streaming in.
		var svc map[string]row
		waitUntil(t, 20*time.Second, "web 3/3 and api 2/2 running and healthy on the cluster page", func() bool {
			svc = services()
			return len(svc) == 2 && svc["web"]["desired"] == "3" && svc["web"]["effective"] == "3" && svc["web"]["running"] == "3" &&
				svc["web"]["healthy"] == "3" && svc["api"]["desired"] == "2" && svc["api"]["running"] == "2" && svc["api"]["healthy"] == "2"
		})
		if svc["web"]["image"] != "nginx:1.28" || svc["web"]["ports"] != "8080" {
			t.Errorf("web's row: %v", svc["web"])
		}
		var nodes []row
		domEval(t, ctx, tableJS("#cluster table.nodes"), &nodes)
		byID := byKey(nodes, "id")
		total := 0
		for _, n := range []string{"node-0001", "node-0002", "node-0003"} {
			if byID[n]["state"] != "alive" {
				t.Errorf("node %s on the cluster page: %v", n, byID[n])
			}
			var c int
			fmt.Sscan(byID[n]["instances"], &c)
			total += c
		}
		if len(nodes) != 3 || total != 5 {
			t.Errorf("nodes table: %d rows, %d instances, want 3 and 5: %v", len(nodes), total, nodes)
		}
		var bars int
		domEval(t, ctx, `document.querySelectorAll("#cluster table.nodes span.bar").length`, &bars)
		if bars != 6 {
			t.Errorf("%d allocation bars, want a cpu and a memory bar per node", bars)
		}
		screenshot(t, ctx, "cluster.png")
	})

	t.Run("scaling shows within a second, without reload", func(t *testing.T) {
		runIn(t, ctx, chromedp.Navigate(ui))
		waitUntil(t, 10*time.Second, "the live stream connected", func() bool {
			var s string
			domEval(t, ctx, `document.getElementById("live-state").textContent`, &s)
			return strings.Contains(s, "live: connected")
		})
		var marked bool
		domEval(t, ctx, `window.consoleMark = "same page"; true`, &marked)
		started := time.Now()
		srv.ok(t, "apply", "-f", serviceFile(t, dir, "api", 4))
		applied := time.Now()
		var took time.Duration
		for {
			if s := services(); s["api"]["desired"] == "4" {
				took = time.Since(applied)
				break
			}
			if time.Since(applied) > 10*time.Second {
				t.Fatalf("api's desired count not 4 on the page 10s after the apply: %v", services()["api"])
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("the page showed the new desired count %s after the apply returned (%s after it started)", took, time.Since(started)-time.Since(applied)+took)
		if took > time.Second {
			t.Errorf("the page showed the change %s after the apply, want within 1s", took)
		}
		waitUntil(t, 30*time.Second, "api 4/4 running on the page", func() bool { return services()["api"]["running"] == "4" })
		var mark string
		domEval(t, ctx, `window.consoleMark || "reloaded"`, &mark)
		if mark != "same page" {
			t.Errorf("the page was reloaded: %q", mark)
		}
	})

	t.Run("why graph equals why -o json", func(t *testing.T) {
		eps, _, _ := srv.factsUnder(t, "endpoint/service/web/")
		var key string
		for k := range eps {
			key = k
			break
		}
		var cli struct {
			Root  string
			Nodes []struct{ ID, Rule, Origin string }
			Edges []struct{ From, To string }
		}
		if err := json.Unmarshal([]byte(srv.ok(t, "why", key, "-o", "json")), &cli); err != nil {
			t.Fatal(err)
		}
		runIn(t, ctx, chromedp.Navigate(ui+"why?key="+key), chromedp.WaitVisible(chromedp.CSS("svg.why")))
		var drawn struct {
			Root    string
			Facts   []string
			Firings []string
			Edges   [][3]string // from, to, kind
			Labels  []string
		}
		domEval(t, ctx, `({
			root: document.querySelector(".graph").dataset.root,
			facts: Array.from(document.querySelectorAll("svg.why g.fact")).map(g => g.dataset.id),
			firings: Array.from(document.querySelectorAll("svg.why g.firing")).map(g => g.dataset.rule),
			edges: Array.from(document.querySelectorAll("svg.why g.edge")).map(g => [g.dataset.from, g.dataset.to, g.getAttribute("class").replace("edge edge-", "")]),
			labels: Array.from(document.querySelectorAll("svg.why g.edge-read text.label")).map(t => t.textContent),
		})`, &drawn)
		for _, rule := range []string{"publish_endpoint", "schedule", "create_instances", "resolve_intent", "apply"} {
			if !slices.Contains(drawn.Firings, rule) {
				t.Errorf("no firing of %s in the graph of %s: %v", rule, key, drawn.Firings)
			}
		}
		var want []string
		for _, n := range cli.Nodes {
			want = append(want, n.ID)
		}
		sort.Strings(want)
		got := slices.Sorted(slices.Values(drawn.Facts))
		if drawn.Root != cli.Root || !slices.Equal(got, want) {
			t.Errorf("fact nodes differ from why -o json:\nroot %s vs %s\npage %v\ncli  %v", drawn.Root, cli.Root, got, want)
		}
		// A fact's edge to what it read is drawn fact → firing → read
		// fact, or directly when no firing wrote it: compose them back.
		wrote := map[string][]string{}
		var gotEdges []string
		for _, e := range drawn.Edges {
			if e[2] == "wrote" {
				wrote[e[1]] = append(wrote[e[1]], e[0])
			}
		}
		for _, e := range drawn.Edges {
			switch e[2] {
			case "because":
				gotEdges = append(gotEdges, e[0]+" -> "+e[1])
			case "read":
				for _, fact := range wrote[e[0]] {
					gotEdges = append(gotEdges, fact+" -> "+e[1])
				}
			}
		}
		var wantEdges []string
		for _, e := range cli.Edges {
			wantEdges = append(wantEdges, e.From+" -> "+e.To)
		}
		sort.Strings(gotEdges)
		sort.Strings(wantEdges)
		if !slices.Equal(slices.Compact(gotEdges), slices.Compact(wantEdges)) {
			t.Errorf("edges differ from why -o json:\npage %v\ncli  %v", gotEdges, wantEdges)
		}
		if len(drawn.Labels) == 0 || !strings.HasPrefix(drawn.Labels[0], "@") {
			t.Errorf("read edges are not labelled with the revision read: %v", drawn.Labels)
		}
		var tip string
		domEval(t, ctx, `document.querySelector('svg.why g.firing[data-rule="schedule"] title').textContent`, &tip)
		if !strings.Contains(tip, "policies/scheduler.hcl:") || !strings.Contains(tip, `rule "schedule"`) {
			t.Errorf("the schedule firing's tooltip has no file:line and rule text:\n%s", tip)
		}
		runIn(t, ctx, chromedp.EmulateViewport(2400, 1400))
		screenshot(t, ctx, "why.png")
		runIn(t, ctx, chromedp.EmulateViewport(1400, 1000))
		// Clicking a fact walks on: the placement's own graph.
		placement := "placement/instance/" + strings.TrimPrefix(key, "endpoint/service/web/")
		var ids []string
		followLink(t, ctx, fmt.Sprintf(`svg.why g.fact[data-key=%q] a`, placement))
		domEval(t, ctx, `Array.from(document.querySelectorAll("svg.why g.fact")).map(g => g.dataset.key)`, &ids)
		var root string
		domEval(t, ctx, `document.querySelector(".graph").dataset.root`, &root)
		if !strings.HasPrefix(root, placement+"@") || slices.Contains(ids, key) {
			t.Errorf("after clicking %s the graph's root is %s with %v", placement, root, ids)
		}
	})

	t.Run("why-not of an unplaceable instance", func(t *testing.T) {
		srv.ok(t, "apply", "-f", writeFile(t, dir, "huge.hcl",
			"service \"huge\" {\n  image     = \"nginx:1.28\"\n  instances = 1\n  resources { cpu = 64  memory = \"512Mi\" }\n  placement { zone = \"mars\" }\n}\n"))
		var id string
		waitUntil(t, 20*time.Second, "a rejection recorded for huge's instance", func() bool {
			obs, _, _ := srv.factsUnder(t, "observed/instance/")
			for k, v := range obs {
				if strings.HasSuffix(k, "/service") && v == `"huge"` {
					id = strings.TrimSuffix(strings.TrimPrefix(k, "observed/instance/"), "/service")
				}
			}
			return id != "" && srv.ccattler(t, "why-not", "instance", id).code == 0
		})
		var rec struct {
			Rejected []facts.EventRejection
		}
		if err := json.Unmarshal([]byte(srv.ok(t, "why-not", "instance", id, "-o", "json")), &rec); err != nil {
			t.Fatal(err)
		}
		runIn(t, ctx, chromedp.Navigate(ui+"whynot?id="+id), chromedp.WaitVisible(chromedp.CSS("table.whynot")))
		var rows []struct {
			Key, Failed string
			Marks       []string
		}
		domEval(t, ctx, `Array.from(document.querySelectorAll("table.whynot tbody tr")).map(tr => ({
			key: tr.dataset.key, failed: tr.dataset.failed,
			marks: Array.from(tr.querySelectorAll("td.fail")).map(td => tr.closest("table").querySelectorAll("th")[td.cellIndex].textContent)}))`, &rows)
		var heads []string
		domEval(t, ctx, `Array.from(document.querySelectorAll("table.whynot th")).map(th => th.textContent)`, &heads)
		if !slices.Contains(heads, "alive") || !slices.Contains(heads, "memory") {
			t.Errorf("the why-not table does not show the filters every node passed: %v", heads)
		}
		got := map[string]string{}
		for _, r := range rows {
			if fmt.Sprint(slices.Sorted(slices.Values(r.Marks))) != fmt.Sprint(slices.Sorted(slices.Values(strings.Fields(r.Failed)))) {
				t.Errorf("row %s marks %v but names %q", r.Key, r.Marks, r.Failed)
			}
			got[r.Key] = r.Failed
		}
		want := map[string]string{}
		for _, r := range rec.Rejected {
			want[r.Candidate["node"]] = strings.Join(r.Filters, " ")
		}
		for _, n := range []string{"node-0001", "node-0002", "node-0003"} {
			if !strings.Contains(got[n], "cpu") || !strings.Contains(got[n], "zone") {
				t.Errorf("why-not page: %s not rejected by cpu and zone: %v", n, got)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("why-not page %v, why-not -o json %v", got, want)
		}
		screenshot(t, ctx, "whynot.png")
		// The instance page shows the same table.
		runIn(t, ctx, chromedp.Navigate(ui+"instance?id="+id), chromedp.WaitVisible(chromedp.CSS("table.whynot")))
	})

	t.Run("service, events and rules pages", func(t *testing.T) {
		runIn(t, ctx, chromedp.Navigate(ui+"service?name=web"))
		var insts []row
		domEval(t, ctx, tableJS("table.instances"), &insts)
		var eps []row
		domEval(t, ctx, tableJS("table.endpoints"), &eps)
		var firings []string
		domEval(t, ctx, `Array.from(document.querySelectorAll("table.firings tr[data-event] td:nth-child(3) a")).map(a => a.textContent)`, &firings)
		if len(insts) != 3 || len(eps) != 3 || !slices.Contains(firings, "publish_endpoint") || !slices.Contains(firings, "schedule") {
			t.Errorf("service page of web: %d instances, %d endpoints, firings %v", len(insts), len(eps), firings)
		}
		runIn(t, ctx, chromedp.Navigate(ui+"events?rule=schedule"))
		var rules []string
		domEval(t, ctx, `Array.from(document.querySelectorAll("table.firings tr[data-event] td:nth-child(3) a")).map(a => a.textContent)`, &rules)
		if len(rules) < 5 || slices.IndexFunc(rules, func(r string) bool { return r != "schedule" }) >= 0 {
			t.Errorf("events filtered by rule schedule: %v", rules)
		}
		var chart int
		waitUntil(t, 10*time.Second, "the rounds timeline has samples", func() bool {
			runIn(t, ctx, chromedp.Navigate(ui+"events"))
			domEval(t, ctx, `document.querySelectorAll("svg.rounds rect").length`, &chart)
			return chart > 0
		})
		runIn(t, ctx, chromedp.Navigate(ui+"rules"))
		var where string
		domEval(t, ctx, `document.querySelector('table.rules tr[data-key="schedule"] td:nth-child(2)').textContent`, &where)
		var server string
		domEval(t, ctx, `document.querySelector("section.server h2").textContent`, &server)
		if !strings.HasPrefix(where, "policies/scheduler.hcl:") || !strings.Contains(server, "server-1") || !strings.Contains(server, "leader") {
			t.Errorf("rules page: schedule at %q, server %q", where, server)
		}
	})

	t.Run("read-only and loopback names only", func(t *testing.T) {
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			req, _ := http.NewRequest(m, ui+"why?key=desired/service/web", strings.NewReader("x"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s: %d, want 405", m, resp.StatusCode)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, ui, nil)
		req.Host = "attacker.example:80" // a rebound name reaching 127.0.0.1
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host attacker.example: %d, want 421", resp.StatusCode)
		}
		for _, bad := range []string{"why?key=no/such/form", "why?key=desired/service/nosuch", "whynot?id=../../x", "service?name=NoSuch", "instance?id=zz", "why?key=desired/service/web&depth=9999", "why?key=auth/user:admin/rules", "api/why?key=auth/engine/rules"} {
			resp, err := http.Get(ui + bad)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Errorf("%s: %d, want a 4xx answer", bad, resp.StatusCode)
			}
		}
	})
}

// The rules page of a server whose reload was rejected: the running set
// stays listed, and the rejected files' diagnostics are shown at their line.
func TestConsoleRulesPageShowsARejectedReload(t *testing.T) {
	dir := policyCopy(t, nil)
	srv, admin := newEngineServer(t, "--policies", dir)
	writeFile(t, dir, "zz_broken.hcl", "rule \"broken\" {\n  when = \n}\n")
	if r := srv.ccattler(t, "rules", "reload"); r.code == 0 {
		t.Fatalf("a reload of a broken file was accepted:\n%s", r.stdout)
	}
	ctx := browser(t)
	runIn(t, ctx, chromedp.Navigate("http://"+admin+"/ui/rules"))
	var page struct {
		Diag, Reloads, Where, Text string
	}
	domEval(t, ctx, `({
		diag: (document.querySelector("section.server pre.diag") || {}).textContent || "",
		reloads: Array.from(document.querySelectorAll("section.server table.kv tr")).map(tr => tr.textContent).join(" | "),
		where: document.querySelector('table.rules tr[data-key="schedule"] td:nth-child(2)').textContent,
		text: document.querySelector('table.rules tr[data-key="schedule"] pre').textContent,
	})`, &page)
	if !strings.Contains(page.Diag, "zz_broken.hcl:2") {
		t.Errorf("the rejected reload's diagnostics do not point at zz_broken.hcl:2:\n%s", page.Diag)
	}
	if !strings.Contains(page.Reloads, "0 accepted, 1 rejected") {
		t.Errorf("reload counts: %s", page.Reloads)
	}
	if !strings.HasPrefix(page.Where, filepath.Join(dir, "scheduler.hcl")+":") && !strings.HasPrefix(page.Where, "scheduler.hcl:") {
		t.Errorf("schedule is at %q", page.Where)
	}
	if !strings.HasPrefix(page.Text, `rule "schedule"`) || !strings.Contains(page.Text, "filters") {
		t.Errorf("the rule's text:\n%s", page.Text)
	}
}
