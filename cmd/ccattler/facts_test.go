package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// TestFactsWatch follows desired/ while a file is applied: one line per
// key, all at the apply's revision, and Ctrl-C ends the watch with exit 0.
func TestFactsWatch(t *testing.T) {
	srv := newServer(t, t.TempDir())
	watch := exec.Command(bin, append(srv.flags(), "facts", "watch", "desired/service/")...)
	out, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer watch.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The watch starts after the revision it reads at start-up; apply until
	// it has certainly started, then expect the changes of one apply.
	time.Sleep(500 * time.Millisecond)
	srv.ok(t, "apply", "-f", webExample)
	var got []string
	for len(got) < 4 {
		select {
		case l := <-lines:
			got = append(got, l)
		case <-time.After(10 * time.Second):
			t.Fatalf("watch printed only %q", got)
		}
	}
	rev := strings.Fields(got[0])[0]
	want := []string{
		rev + " put desired/service/web = {}",
		rev + " put desired/service/web/expose/8080 = {}",
		rev + ` put desired/service/web/image = "nginx:1.28"`,
		rev + " put desired/service/web/instances = 3",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("watch printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	srv.ok(t, "delete", "service", "web")
	select {
	case l := <-lines:
		if !strings.HasSuffix(l, " delete desired/service/web") {
			t.Errorf("after delete, watch printed %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch printed nothing for a delete")
	}
	_ = watch.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- watch.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("watch ended with %v on SIGINT, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("watch did not end within 10s of SIGINT")
	}
}

// TestFactsSchema lists every key form of the built-in schema, as a table
// and as JSON, without needing etcd.
func TestFactsSchema(t *testing.T) {
	types := facts.Default.Types()
	r := run(t, "--etcd", "http://127.0.0.1:1", "facts", "schema")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != len(types)+1 {
		t.Fatalf("%d lines for %d key forms", len(lines), len(types))
	}
	for _, want := range []string{
		"observed/instance/{instance-id}/state  enum(pending|running|failed|stopped)",
		"endpoint/service/{name}/{instance-id}  object{ip:ip,port:int}",
	} {
		found := false
		for _, l := range lines {
			if strings.Join(strings.Fields(l), " ") == strings.Join(strings.Fields(want), " ")+" "+strings.Join(strings.Fields(docOf(l, types)), " ") {
				found = true
			}
		}
		if !found {
			t.Errorf("no line %q in:\n%s", want, r.stdout)
		}
	}
	r = run(t, "facts", "schema", "-o", "json")
	var rows []struct {
		Name string `json:"name"`
		Key  string `json:"key"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != len(types) {
		t.Fatalf("facts schema -o json: %d rows, err %v", len(rows), err)
	}
	for i, tp := range types {
		if rows[i].Key != tp.Template || rows[i].Name != tp.Name || rows[i].Type != tp.Value.Kind.String() {
			t.Errorf("row %d = %+v, want %s %s", i, rows[i], tp.Name, tp.Template)
		}
	}
}

// docOf returns the doc of the type whose template starts the line.
func docOf(line string, types []*facts.FactType) string {
	for _, tp := range types {
		if strings.HasPrefix(line, tp.Template+" ") {
			return tp.Doc
		}
	}
	return ""
}

// A PREFIX is relative to --root: an etcd key (/ccattler/desired/) is a
// usage mistake naming the prefix to give, for get and watch alike, and a
// prefix with no fact under it says so on stderr.
func TestFactsPrefix(t *testing.T) {
	srv := newServer(t, t.TempDir())
	srv.ok(t, "apply", "-f", webExample)
	for _, args := range [][]string{{"facts", "get", "/ccattler/desired/"}, {"facts", "watch", "/ccattler/desired/"}} {
		if r := srv.ccattler(t, args...); r.code != 2 || !strings.Contains(r.stderr, `keys are relative to --root /ccattler/; give "desired/"`) {
			t.Errorf("%v: exit %d, %s", args, r.code, r.stderr)
		}
	}
	if r := srv.ccattler(t, "facts", "get", "/etc"); r.code != 2 || !strings.Contains(r.stderr, "never begin with /") {
		t.Errorf("facts get /etc: exit %d, %s", r.code, r.stderr)
	}
	if r := srv.ccattler(t, "facts", "get", "nosuch/"); r.code != 0 || r.stdout != "" || !strings.HasPrefix(r.stderr, `no facts under "nosuch/" at revision `) {
		t.Errorf("facts get nosuch/: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
	if r := srv.ccattler(t, "facts", "get", "desired/service/web/image"); r.code != 0 || r.stdout != "desired/service/web/image = \"nginx:1.28\"\n" || r.stderr != "" {
		t.Errorf("facts get desired/service/web/image: exit %d, %q, %q", r.code, r.stdout, r.stderr)
	}
}
