package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts/etcdtest"
)

// TestDevRunsTheMainJob runs the README's one-process command (dev) as a newcomer
// would, on free ports instead of etcd's default ones: the three instances
// of examples/web.hcl are placed, run and get endpoints, the live log says
// so in words, other commands reach it, and Ctrl-C stops it with exit code
// 0 and takes its temporary data with it.
func TestDevRunsTheMainJob(t *testing.T) {
	client := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	cmd := exec.Command(bin, "dev", "-f", webExample,
		"--listen-client", client, "--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)))
	cmd.Env = append(os.Environ(), "CCATTLER_ETCD=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	logged := func(re *regexp.Regexp) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, l := range lines {
			if re.MatchString(l) {
				out = append(out, l)
			}
		}
		return out
	}
	dump := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(lines, "\n") + "\nstderr:\n" + stderr.String()
	}
	wait := func(what string, re *regexp.Regexp, n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for len(logged(re)) < n {
			select {
			case <-exited:
				t.Fatalf("dev exited before %s:\n%s", what, dump())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("not within 60s: %s\n%s", what, dump())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	wait("three placements in the live log", regexp.MustCompile(`\bschedule +placement/instance/\w+ = "node-\d"`), 3)
	wait("three endpoints in the live log", regexp.MustCompile(`\bpublish_endpoint +endpoint/service/web/\w+ = \{"ip":"10\.1\.\d+\.\d+","port":8080\}`), 3)
	// An agent's metrics are named by what they are, not by the instance id.
	wait("a metrics report", regexp.MustCompile(`\breport +instance (\w+) service/web/metrics/cpu=`), 1)
	attr := regexp.MustCompile(`\breport +instance (\w+) (\w+)=`)
	for _, l := range logged(attr) {
		if m := attr.FindStringSubmatch(l); m[1] == m[2] {
			t.Errorf("a report line names the instance id as its attribute: %q", l)
		}
	}

	// Other commands reach it at its etcd.
	r := run(t, "--etcd", client, "facts", "get", "endpoint/service/web/")
	if r.code != 0 || strings.Count(r.stdout, "endpoint/service/web/") != 3 {
		t.Fatalf("facts get endpoint/service/web/: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	banner := logged(regexp.MustCompile(`^ccattler dev: etcd .*, data (\S+), 3 simulated nodes; Ctrl-C stops$`))
	if len(banner) != 1 {
		t.Fatalf("no banner naming the data directory:\n%s", dump())
	}
	dataDir := regexp.MustCompile(`data (\S+),`).FindStringSubmatch(banner[0])[1]
	if _, err := os.Stat(dataDir); err != nil {
		t.Fatalf("data directory %s while running: %v", dataDir, err)
	}

	// Ctrl-C.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("dev did not exit within 30s of SIGINT:\n%s", dump())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("dev exited with %d after SIGINT, want 0:\n%s", code, dump())
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("temporary data directory %s left behind (stat: %v)", dataDir, err)
	}
}
