package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

func TestCacheRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	body := cacheBody{Node: "node-1", Rev: 42, SavedAt: time.Unix(1700000000, 0).UTC(),
		Instances: map[string]Spec{"a8f31": {ID: "a8f31", Service: "web", Image: "nginx:1.28", CPU: 0.5, Memory: 256 << 20,
			Ports: []int{8080}, Health: HealthSpec{Method: "GET", Path: "/healthz", Interval: 10 * time.Second}}},
		Failed: map[string]string{"b72c9": "start: image not found"}}
	good := filepath.Join(dir, "good")
	if err := saveCache(good, body, true); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(good)
	tests := []struct {
		name    string
		content []byte // nil: no file
		found   bool
		corrupt bool
	}{
		{"missing file", nil, false, false},
		{"intact", raw, true, false},
		{"a flipped byte in the body", flip(raw, len(raw)-5), true, true},
		{"truncated", raw[:len(raw)-10], true, true},
		{"no header", []byte(`{"node": "node-1"}`), true, true},
		{"empty", []byte{}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if tc.content != nil {
				os.WriteFile(p, tc.content, 0o600)
			}
			got, found, err := loadCache(p)
			if found != tc.found {
				t.Errorf("found = %v, want %v", found, tc.found)
			}
			if tc.corrupt {
				if err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), p) {
					t.Fatalf("err = %v, want ErrCacheCorrupt naming the file", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.found && (got.Rev != 42 || got.Instances["a8f31"].Health.Interval != 10*time.Second ||
				got.Instances["a8f31"].Memory != 256<<20 || got.Failed["b72c9"] == "") {
				t.Fatalf("round trip lost data: %+v", got)
			}
		})
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x01
	return c
}

func TestBuildWant(t *testing.T) {
	attrs := func(kv ...string) map[string][]byte {
		m := map[string][]byte{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = []byte(kv[i+1])
		}
		return m
	}
	tests := []struct {
		name  string
		attrs map[string][]byte
		ready bool
		err   string
		check func(Spec) bool
	}{
		{"unknown service", nil, false, "", nil},
		{"no image yet", attrs("instances", "3"), false, "", nil},
		{"full service", attrs("image", `"nginx:1.28"`, "resources/cpu", "0.5", "resources/memory", `"256Mi"`,
			"expose/8080", "{}", "expose/443", "{}", "health/method", `"GET"`, "health/path", `"/healthz"`, "health/interval", `"5s"`),
			true, "", func(s Spec) bool {
				return s.Image == "nginx:1.28" && s.CPU == 0.5 && s.Memory == 256<<20 && len(s.Ports) == 2 &&
					s.Ports[0] == 443 && s.Health.Method == "GET" && s.Health.Interval == 5*time.Second
			}},
		{"command, env and their digest", attrs("image", `"nginx:1.28"`, "command", `["/bin/sh", "-c"]`, "env/A", `"1"`, "spec_digest", `"2f5fe11ad9e492f8"`),
			true, "", func(s Spec) bool {
				return s.Digest == "2f5fe11ad9e492f8" && len(s.Command) == 2 && s.Env["A"] == "1"
			}},
		{"a digest that is not one", attrs("image", `"nginx:1.28"`, "spec_digest", `"yes"`), false, "spec_digest", nil},
		{"invalid memory quantity", attrs("image", `"nginx:1.28"`, "resources/memory", `"12XB"`), false, "12XB", nil},
		{"invalid health method", attrs("image", `"nginx:1.28"`, "health/method", `"PING"`), false, "health/method", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := buildWant("a8f31", "web", tc.attrs, facts.Default)
			if w.Ready != tc.ready {
				t.Errorf("ready = %v, want %v (err %q)", w.Ready, tc.ready, w.Err)
			}
			if (tc.err == "") != (w.Err == "") || !strings.Contains(w.Err, tc.err) {
				t.Errorf("err = %q, want one containing %q", w.Err, tc.err)
			}
			if tc.check != nil && !tc.check(w.Spec) {
				t.Errorf("spec = %+v", w.Spec)
			}
		})
	}
}

func TestHealthCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.WriteHeader(200)
		case "/moved":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		default:
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(p)
	closed := func() int { // a port nobody listens on
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}()
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"GET 200", Spec{Ports: []int{port}, Health: HealthSpec{Method: "GET", Path: "/healthz"}}, Healthy},
		{"GET 503", Spec{Ports: []int{port}, Health: HealthSpec{Method: "GET", Path: "/broken"}}, Unhealthy},
		{"HEAD 200", Spec{Ports: []int{port}, Health: HealthSpec{Method: "HEAD", Path: "/healthz"}}, Healthy},
		{"a redirect is an answer", Spec{Ports: []int{port}, Health: HealthSpec{Method: "GET", Path: "/moved"}}, Healthy},
		{"GET on a closed port", Spec{Ports: []int{closed}, Health: HealthSpec{Method: "GET", Path: "/healthz"}}, Unhealthy},
		{"TCP open", Spec{Ports: []int{port}, Health: HealthSpec{Method: "TCP"}}, Healthy},
		{"TCP closed", Spec{Ports: []int{closed}, Health: HealthSpec{Method: "TCP"}}, Unhealthy},
		{"no block, a port: TCP", Spec{Ports: []int{port}}, Healthy},
		{"no block, no port: healthy while it runs", Spec{}, Healthy},
		{"a method without a port", Spec{Health: HealthSpec{Method: "GET"}}, Unknown},
	}
	client := &http.Client{Timeout: 2 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if got, why := check(ctx, tc.spec, "127.0.0.1", client); got != tc.want {
				t.Errorf("check = %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}

// TestClip: a reason cut to the schema's bound stays valid UTF-8, within
// the bound, and says it was cut.
func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly-10", 10, "exactly-10"},
		{"0123456789abc", 10, "012345 ..."},
		{"ééééééé", 9, "éé ..."}, // é is two bytes: the cut backs off to a rune start
	} {
		got := clip(tc.in, tc.n)
		if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// FuzzLoadCache: whatever is on disk, loading the cache never panics, and a
// file that loads is one saveCache could have written (its checksum holds).
func FuzzLoadCache(f *testing.F) {
	dir := f.TempDir()
	good := filepath.Join(dir, "seed")
	if err := saveCache(good, cacheBody{Node: "n1", Instances: map[string]Spec{"a8f31": {ID: "a8f31", Image: "x:1"}}}, false); err != nil {
		f.Fatal(err)
	}
	raw, _ := os.ReadFile(good)
	f.Add(raw)
	f.Add([]byte(cacheMagic + "00\n{}"))
	f.Add([]byte{})
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, content []byte) {
		p := filepath.Join(t.TempDir(), "cache")
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		body, found, err := loadCache(p)
		if !found {
			t.Fatal("an existing file reported missing")
		}
		if err != nil {
			return
		}
		// Round trip: what loaded saves and loads to the same.
		if err := saveCache(p, body, false); err != nil {
			t.Fatal(err)
		}
		again, _, err := loadCache(p)
		if err != nil || again.Node != body.Node || len(again.Instances) != len(body.Instances) {
			t.Fatalf("round trip: %v %+v %+v", err, again, body)
		}
	})
}

// Desired gives every instance of a service the service's spec under its
// own id, and follows the service: a changed image reaches the instances
// placed before the change.
func TestDesiredFollowsServiceChanges(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	writeRaw(t, s, facts.ServiceAttr("web", "image"), `"nginx:1.28"`)
	for _, id := range []string{"a8f31", "b0c42"} {
		writeRaw(t, s, facts.Placement(id), `"node-1"`, facts.NodePlacement("node-1", id), `"web"`, facts.InstanceService(id), `"web"`)
	}
	f := NewFeed(s, nil)
	f.Subscribe("node-1") // the feed reads the services of subscribed nodes' instances
	runFeed(t, f)
	check := func(image string) {
		t.Helper()
		var got map[string]*Want
		var ok bool
		eventually(t, func() string { // the feed follows etcd on its own goroutine
			got, ok = f.Desired("node-1")
			for _, w := range got {
				if w.Spec.Image != image {
					return "image " + w.Spec.Image + ", want " + image
				}
			}
			if len(got) != 2 {
				return fmt.Sprintf("%d instances, want 2", len(got))
			}
			return ""
		})
		if !ok || len(got) != 2 {
			t.Fatalf("Desired = %v, %v; want two instances", got, ok)
		}
		for id, w := range got {
			if w.Spec.ID != id || w.Spec.Service != "web" || w.Spec.Image != image || !w.Ready {
				t.Errorf("%s: %+v, want id %s, service web, image %s, ready", id, w, id, image)
			}
		}
	}
	check("nginx:1.28")
	writeRaw(t, s, facts.ServiceAttr("web", "image"), `"nginx:1.29"`)
	check("nginx:1.29")
}

// An entry whose key is not an instance id is not one the scheduler
// makes: the feed ignores it and logs it once, however often it is seen
// (relists, rewrites).
func TestFeedIgnoresInvalidEntryKeys(t *testing.T) {
	s := etcdtest.Start(t).Store(t)
	var logs etcdtest.Logs
	f := NewFeed(s, logs.Logger())
	f.Subscribe("node-1")
	writeRaw(t, s, "placement/node/node-1/hidden", `"web"`) // seen by the first list...
	runFeed(t, f)
	for range 2 {
		writeRaw(t, s, "placement/node/node-1/hidden", `"web"`) // ...by the watch...
	}
	writeRaw(t, s, facts.NodePlacement("node-1", "a8f31"), `"web"`)
	f.Resync() // ...and by a relist
	eventually(t, func() string {
		if n := strings.Count(logs.String(), "listed placements and services"); n < 2 {
			return "no relist after Resync"
		}
		return ""
	})
	got, _ := f.Desired("node-1")
	if _, ok := got["hidden"]; ok || len(got) != 1 {
		t.Errorf("Desired = %v, want a8f31 alone", got)
	}
	if n := strings.Count(logs.String(), "placement/node/node-1/hidden"); n != 1 {
		t.Errorf("the ignored placement was logged %d times, want once:\n%s", n, logs.String())
	}
}

// A feed watches the entries of the nodes it serves: one node's own
// prefix, a fleet's the longest its ids share (what a fleet principal's
// grant is), every node's when the ids share nothing.
func TestPlacementsOf(t *testing.T) {
	for _, tc := range []struct {
		nodes []string
		want  string
	}{
		{nil, "placement/node/"},
		{[]string{"node-1"}, "placement/node/node-1/"},
		{[]string{"sim-0001", "sim-0002", "sim-0010"}, "placement/node/sim-00"},
		{[]string{"node-1", "node-10"}, "placement/node/node-1"},
		{[]string{"a-1", "b-1"}, "placement/node/"},
	} {
		if got := placementsOf(tc.nodes); got != tc.want {
			t.Errorf("placementsOf(%v) = %q, want %q", tc.nodes, got, tc.want)
		}
	}
}
