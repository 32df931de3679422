package containerd_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/client"

	"github.com/ccattler/ccattler/agent/containerd"
)

// skipOrFail skips outside CI and fails in CI (CI=true), where a missing
// service is a broken test machine, not an excuse.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// daemon is a containerd started by the test with its own root, state and socket.
type daemon struct {
	dir, sock string
	namespace string // unique per run: the cgroups of containers are named after it
	cmd       *exec.Cmd
}

// startDaemon starts `containerd --root T/root --state T/state --address T/containerd.sock`
// with a minimal config (the CRI plugin off), as root. At cleanup it kills
// and removes every container of the test namespace, then stops the daemon.
func startDaemon(t *testing.T) *daemon {
	t.Helper()
	if os.Getuid() != 0 {
		skipOrFail(t, "containerd tests need root (uid %d)", os.Getuid())
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		skipOrFail(t, "containerd not installed (apt-get install -y containerd runc): %v", err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		skipOrFail(t, "runc not installed (apt-get install -y runc): %v", err)
	}
	// A short directory: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "ccd-")
	if err != nil {
		t.Fatal(err)
	}
	// Cgroup paths are /<namespace>/<id> host-wide: concurrent test runs
	// with their own daemons must not share them.
	d := &daemon{dir: dir, sock: filepath.Join(dir, "containerd.sock"), namespace: "ccattler-test-" + filepath.Base(dir)[len("ccd-"):]}
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`version = 2
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
`, d.sock)), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "--config", conf, "--root", filepath.Join(dir, "root"),
		"--state", filepath.Join(dir, "state"), "--address", d.sock)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		skipOrFail(t, "start containerd: %v", err)
	}
	t.Cleanup(func() { d.stop(t); logf.Close(); os.RemoveAll(dir) })
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := client.New(d.sock, client.WithDefaultNamespace(d.namespace))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = c.Version(ctx)
			cancel()
			c.Close()
			if err == nil {
				return d
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			skipOrFail(t, "containerd did not answer on %s within 15s: %v\n%s", d.sock, err, tail(log, 2000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (d *daemon) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(d.sock, client.WithDefaultNamespace(d.namespace))
	if err != nil {
		t.Fatalf("containerd client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (d *daemon) stop(t *testing.T) {
	if c, err := client.New(d.sock, client.WithDefaultNamespace(d.namespace)); err == nil {
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
	// runc removes a container's cgroup but not the namespace's parent
	// directory; remove the (now empty) ones of this run.
	if dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", d.namespace)); len(dirs) > 0 {
		for _, dir := range dirs {
			_ = syscall.Rmdir(dir)
		}
	}
	_ = syscall.Rmdir(filepath.Join("/sys/fs/cgroup", d.namespace))
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// buildServer compiles testdata/healthz.go.txt into a static binary.
func buildServer(t *testing.T) []byte {
	t.Helper()
	return buildProgram(t, "testdata/healthz.go.txt")
}

// buildProgram compiles one Go source file of testdata into a static binary.
func buildProgram(t *testing.T, path string) []byte {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module testprogram\n\ngo 1.22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "server")
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(goruntime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build test server: %v\n%s", err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// writeImage writes an OCI image archive named ref holding /server,
// which it runs with args: containerd.Pack, as `ccattler image pack` does.
func writeImage(t *testing.T, path, ref string, server []byte, args ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = containerd.Pack(f, containerd.PackSpec{Ref: ref, Files: []containerd.PackFile{{Path: "/server", Data: server}},
		Entrypoint: append([]string{"/server"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
}
