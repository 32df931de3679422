package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// The path docs/nodes.md walks, with the real binary and a real containerd
// (started by the test in a temporary directory): pack an image of a static
// binary, import it, run it with a command and env from the service file,
// read its output with `ccattler logs`, delete the service and find nothing
// left in containerd.

// skipOrFailCI skips outside CI and fails in CI (CI=true), where a missing
// service is a broken test machine.
func skipOrFailCI(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// startContainerd runs a containerd of its own (socket, root, state in a
// temporary directory) and returns its socket and a namespace for the test.
func startContainerd(t *testing.T) (sock, namespace string) {
	t.Helper()
	if os.Getuid() != 0 {
		skipOrFailCI(t, "containerd tests need root")
	}
	ctrd, err := exec.LookPath("containerd")
	if err != nil {
		skipOrFailCI(t, "containerd not installed (apt-get install -y containerd runc): %v", err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		skipOrFailCI(t, "runc not installed: %v", err)
	}
	dir, err := os.MkdirTemp("", "ccd-") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	sock, namespace = filepath.Join(dir, "containerd.sock"), "ccattler-e2e-"+filepath.Base(dir)[len("ccd-"):]
	conf := filepath.Join(dir, "config.toml")
	os.WriteFile(conf, []byte(fmt.Sprintf("version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = %q\n", sock)), 0o600)
	logf, _ := os.Create(filepath.Join(dir, "containerd.log"))
	cmd := exec.Command(ctrd, "--config", conf, "--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"), "--address", sock)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		skipOrFailCI(t, "start containerd: %v", err)
	}
	t.Cleanup(func() {
		if c, err := client.New(sock, client.WithDefaultNamespace(namespace)); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			ctrs, _ := c.Containers(ctx)
			for _, ctr := range ctrs {
				if task, err := ctr.Task(ctx, nil); err == nil {
					_, _ = task.Delete(ctx, client.WithProcessKill)
				}
				_ = ctr.Delete(ctx, client.WithSnapshotCleanup)
			}
			cancel()
			c.Close()
		}
		for _, d := range append([]string{filepath.Join("/sys/fs/cgroup", namespace)}, globDirs("/sys/fs/cgroup/*/"+namespace)...) {
			_ = syscall.Rmdir(d)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logf.Close()
		os.RemoveAll(dir)
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if c, err := client.New(sock); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = c.Version(ctx)
			cancel()
			c.Close()
			if err == nil {
				return sock, namespace
			}
		}
		if time.Now().After(deadline) {
			skipOrFailCI(t, "containerd did not answer on %s", sock)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func globDirs(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

// buildStatic compiles one Go file into a static linux binary.
func buildStatic(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "main.go"), b, 0o600)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module echo\n\ngo 1.22\n"), 0o600)
	out := filepath.Join(dir, "echo")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", src, err, b)
	}
	return out
}

func TestContainerdNodeEndToEnd(t *testing.T) {
	sock, ns := startContainerd(t)
	c := newCluster(t)
	dir := t.TempDir()

	// 1. An image without a registry: pack a static binary, import it.
	echo := buildStatic(t, "../../agent/containerd/testdata/echo.go.txt")
	archive := filepath.Join(dir, "echo.tar")
	if r := run(t, "image", "pack", "--name", "echo:1", "--file", echo+":/bin/echo-args", "--entrypoint", "/bin/echo-args", "-o", archive); r.code != 0 {
		t.Fatalf("image pack: %s", r.stderr)
	}
	if r := run(t, "image", "import", "--containerd-address", sock, "--namespace", ns, archive); r.code != 0 ||
		!strings.Contains(r.stdout, "docker.io/library/echo:1") {
		t.Fatalf("image import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// 2. A real node, serving its containers' output on loopback.
	logs := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	c.agent("node", "--runtime", "containerd", "--node-id", "node-1", "--containerd-address", sock, "--namespace", ns,
		"--advertise-address", "127.0.0.1", "--logs-address", logs, "--stop-grace", "3s")
	c.waitFor(30*time.Second, "node-1 alive, host networking, logs served", func() bool {
		return c.get(facts.NodeState("node-1")) == `"alive"` && c.get(facts.NodeNetwork("node-1")) == `"host"` &&
			c.get(facts.NodeLogs("node-1")) == fmt.Sprintf("%q", logs)
	})

	// 3. command and env from the service file, read back through ccattler logs.
	c.apply(dir, "hello.hcl", `service "hello" {
  image     = "echo:1"
  instances = 1
  command   = ["/bin/echo-args", "from the file"]
  env       = { GREETING = "hello, newcomer" }
}
`)
	var id string
	c.waitFor(60*time.Second, "hello running", func() bool {
		in := c.of("hello")
		if len(in) == 1 && in[0].state == "running" {
			id = in[0].id
			return true
		}
		return false
	})
	var out string
	c.waitFor(10*time.Second, "its output", func() bool {
		r := c.srv.ccattler(t, "logs", id)
		out = r.stdout + r.stderr
		return strings.Contains(out, "tick 1")
	})
	for _, want := range []string{`args: ["from the file"]`, "GREETING=hello, newcomer"} {
		if !strings.Contains(out, want) {
			t.Errorf("ccattler logs %s lacks %q:\n%s", id, want, out)
		}
	}

	// 4. Delete: within 5 s no placement, no running instance, and nothing
	// left in containerd's namespace.
	cli, err := client.New(sock, client.WithDefaultNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	start := time.Now()
	if r := c.srv.ccattler(t, "delete", "service", "hello"); r.code != 0 {
		t.Fatalf("delete: %s", r.stderr)
	}
	c.waitFor(5*time.Second, "no placement, no running instance, no container or task of hello", func() bool {
		for _, in := range c.of("hello") {
			if in.placed != "" || in.state == "running" {
				return false
			}
		}
		ctrs, err := cli.Containers(context.Background())
		return err == nil && len(ctrs) == 0
	})
	t.Logf("gone from containerd %s after the delete", time.Since(start).Round(time.Millisecond))
}
