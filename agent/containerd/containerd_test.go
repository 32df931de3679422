package containerd_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/v2/client"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/containerd"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// childConfig is how a test starts an agent in a child process (the test
// binary re-executed), so that it can be killed with SIGKILL like a real one.
type childConfig struct {
	Namespace string
	Endpoints []string
	Node      string
	StateDir  string
	Sock      string
	ImageDir  string
	LogsAddr  string // where the agent serves container output
}

const childEnv = "CCATTLER_AGENT_CHILD"

func TestMain(m *testing.M) {
	if js := os.Getenv(childEnv); js != "" {
		os.Exit(runChild(js))
	}
	os.Exit(m.Run())
}

func runChild(js string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(js), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	store, err := agent.Connect(cc.Endpoints, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rcfg := containerd.NewConfig()
	rcfg.Address, rcfg.Namespace, rcfg.Address4, rcfg.ImageDir, rcfg.Log = cc.Sock, cc.Namespace, "127.0.0.1", cc.ImageDir, log
	rcfg.LogDir = filepath.Join(cc.StateDir, "logs")
	if sn := os.Getenv("CCATTLER_SNAPSHOTTER"); sn != "" {
		rcfg.Snapshotter = sn // e.g. native where /tmp is itself an overlay
	}
	rt, err := containerd.New(ctx, rcfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := agent.NewConfig()
	cfg.Store, cfg.StateDir, cfg.Log = store, cc.StateDir, log
	cfg.Resync, cfg.Probe, cfg.Grace = 300*time.Millisecond, 300*time.Millisecond, 3*time.Second
	nodes := []agent.NodeConfig{{ID: cc.Node, CPU: 2, Memory: 1 << 30, Architecture: "amd64", Zone: "test-1",
		Runtime: rt, HostNetwork: true, LogsAddr: cc.LogsAddr}}
	a, err := agent.New(cfg, nodes)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if cc.LogsAddr != "" {
		ls := &agent.LogServer{Addr: cc.LogsAddr, Nodes: nodes, Log: log}
		go func() {
			if err := ls.Serve(ctx); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	a.Run(ctx)
	return 0
}

// startChild runs an agent process; it is killed at cleanup if still running.
func startChild(t *testing.T, cc childConfig) *exec.Cmd {
	t.Helper()
	js, _ := json.Marshal(cc)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	// The agent dies with the test process, even when that is killed by a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logf, err := os.OpenFile(filepath.Join(cc.StateDir, "agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start agent process: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("agent log:\n%s", tail(b, 8000))
		}
	})
	return cmd
}

func waitFor(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		if last = cond(); last == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("after %s: %s", timeout, last)
}

func put(t *testing.T, s *facts.Store, kv ...any) {
	t.Helper()
	var ops []facts.Op
	for i := 0; i < len(kv); i += 2 {
		raw, err := s.Schema.Encode(kv[i].(string), kv[i+1])
		if err != nil {
			t.Fatalf("encode %s: %v", kv[i], err)
		}
		ops = append(ops, facts.Put(kv[i].(string), raw))
	}
	if _, err := s.Commit(context.Background(), facts.Txn{Ops: ops}); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// observed returns observed/instance/{id}/attr as a string, with its ModRevision.
func observed(t *testing.T, s *facts.Store, id, attr string) (string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f, ok, err := s.Get(ctx, facts.InstanceAttr(id, attr))
	if err != nil || !ok {
		return "", 0
	}
	v, _ := facts.StringValue(f.Value)
	return v, f.ModRevision
}

func httpOK(url string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// taskPid returns the pid of the instance's task, 0 if it has none running.
func taskPid(t *testing.T, c *client.Client, id string) uint32 {
	t.Helper()
	ctx := context.Background()
	ctr, err := c.LoadContainer(ctx, id)
	if err != nil {
		return 0
	}
	task, err := ctr.Task(ctx, nil)
	if err != nil {
		return 0
	}
	st, err := task.Status(ctx)
	if err != nil || st.Status != client.Running {
		return 0
	}
	return task.Pid()
}

// cgroupFile reads a cgroup control file of the container from the host,
// for cgroup v1 (controller hierarchy) or v2 (unified).
func cgroupFile(t *testing.T, c *client.Client, id, v1ctl, v1file, v2file string) string {
	t.Helper()
	ctr, err := c.LoadContainer(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ctr.Spec(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := spec.Linux.CgroupsPath
	candidates := []string{filepath.Join("/sys/fs/cgroup", v1ctl, p, v1file), filepath.Join("/sys/fs/cgroup", p, v2file)}
	if strings.Contains(v1ctl, ",") {
		candidates = append(candidates, filepath.Join("/sys/fs/cgroup/cpu,cpuacct", p, v1file))
	}
	for _, f := range candidates {
		if b, err := os.ReadFile(f); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no cgroup file among %v", candidates)
	return ""
}

func TestContainerdAgent(t *testing.T) {
	d := startDaemon(t)
	cli := d.client(t)
	imgDir := t.TempDir()
	server := buildServer(t)
	writeImage(t, filepath.Join(imgDir, "healthz.tar"), "ccattler.test/healthz:1", server)
	writeImage(t, filepath.Join(imgDir, "stubborn.tar"), "ccattler.test/stubborn:1", server, "-ignore-sigterm")
	writeImage(t, filepath.Join(imgDir, "echo.tar"), "ccattler.test/echo:1", buildProgram(t, "testdata/echo.go.txt"), "image-arg")
	// An archive that cannot be imported is reported and does not stop the agent.
	if err := os.WriteFile(filepath.Join(imgDir, "broken.tar"), []byte("not a tar archive"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := etcdtest.Start(t)
	s := e.Store(t)
	stateDir := t.TempDir()
	cc := childConfig{Namespace: d.namespace, Endpoints: e.Endpoints(), Node: "node-1", StateDir: stateDir, Sock: d.sock, ImageDir: imgDir,
		LogsAddr: fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))}

	port := etcdtest.FreePort(t)
	put(t, s, facts.DesiredService("hz"), map[string]any{}, facts.ServiceImage("hz"), "ccattler.test/healthz:1",
		facts.ServiceCPU("hz"), 0.5, facts.ServiceMemory("hz"), "64Mi", facts.ServiceExpose("hz", port), map[string]any{},
		facts.ServiceHealthMethod("hz"), "GET", facts.ServiceHealthPath("hz"), "/healthz", facts.ServiceHealthInterval("hz"), "1s")
	const id = "c0ffe1"
	put(t, s, facts.InstanceService(id), "hz", facts.Placement(id), "node-1", facts.NodePlacement("node-1", id), "hz")
	top := t // children outlive the subtest that starts them
	child := startChild(top, cc)

	// The steps build on each other: the first that fails ends the test,
	// so that none runs against a world a failed step left behind (etcd down).
	failed := false
	step := func(name string, f func(t *testing.T)) {
		if !failed && !t.Run(name, f) {
			failed = true
		}
	}
	var pid uint32
	var startedAt string
	step("a placement becomes a running, healthy container with its limits", func(t *testing.T) {
		waitFor(t, 60*time.Second, func() string {
			st, _ := observed(t, s, id, "state")
			h, _ := observed(t, s, id, "health")
			if st != "running" || h != "healthy" {
				return fmt.Sprintf("state %q health %q", st, h)
			}
			return ""
		})
		for attr, want := range map[string]string{"node": "node-1", "image": "ccattler.test/healthz:1", "ip": "127.0.0.1"} {
			if got, _ := observed(t, s, id, attr); got != want {
				t.Errorf("%s = %q, want %q", attr, got, want)
			}
		}
		startedAt, _ = observed(t, s, id, "started_at")
		if _, err := time.Parse(time.RFC3339Nano, startedAt); err != nil {
			t.Errorf("started_at %q: %v", startedAt, err)
		}
		if pid = taskPid(t, cli, id); pid == 0 {
			t.Fatal("no running task")
		}
		if err := httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err != nil {
			t.Fatalf("the container does not answer: %v", err)
		}
		if got := cgroupFile(t, cli, id, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(64<<20) {
			t.Errorf("memory limit %s, want %d", got, 64<<20)
		}
		quota := cgroupFile(t, cli, id, "cpu", "cpu.cfs_quota_us", "cpu.max")
		if quota != "50000" && quota != "50000 100000" {
			t.Errorf("cpu quota %q, want 50000 µs per 100000", quota)
		}
	})

	step("a changed health block applies to the running container without restarting it", func(t *testing.T) {
		health := func(want string) func() string {
			return func() string {
				if h, _ := observed(t, s, id, "health"); h != want {
					return "health " + h + ", want " + want
				}
				return ""
			}
		}
		put(t, s, facts.ServiceHealthPath("hz"), "/missing") // the server answers 404
		waitFor(t, 20*time.Second, health("unhealthy"))
		put(t, s, facts.ServiceHealthPath("hz"), "/healthz")
		waitFor(t, 20*time.Second, health("healthy"))
		if got := taskPid(t, cli, id); got != pid {
			t.Fatalf("task pid %d, want %d: the container was restarted", got, pid)
		}
	})

	step("a killed agent, restarted, adopts the running container", func(t *testing.T) {
		oldLease := leaseOf(t, s, "node-1")
		child.Process.Kill()
		child.Wait()
		rev := currentRev(t, s)
		child = startChild(top, cc)
		waitFor(t, 30*time.Second, func() string {
			if l := leaseOf(t, s, "node-1"); l == 0 || l == oldLease {
				return "no new lease yet"
			}
			if _, mod := observed(t, s, id, "state"); mod <= rev {
				return "not re-reported yet"
			}
			return ""
		})
		time.Sleep(time.Second) // a few reconcile rounds of the new agent
		if got := taskPid(t, cli, id); got != pid {
			t.Fatalf("task pid %d, want the same task %d", got, pid)
		}
		if got, _ := observed(t, s, id, "started_at"); got != startedAt {
			t.Fatalf("started_at %q, want %q", got, startedAt)
		}
	})

	step("etcd lost: containers keep running, an agent restarted meanwhile adopts them, all is re-reported", func(t *testing.T) {
		// A 6 s outage (the 30 s is longer than the lease TTL the
		// test would need; the behaviour does not depend on the length).
		// Any write after etcd returns has a higher revision than this one.
		rev := currentRev(t, s)
		e.Close()
		restarted := false
		defer func() {
			if !restarted {
				e.Restart(t)
			}
		}()
		child.Process.Kill()
		child.Wait()
		child = startChild(top, cc) // starts while etcd is unreachable
		for i := 0; i < 6; i++ {
			time.Sleep(time.Second)
			if got := taskPid(t, cli, id); got != pid {
				t.Fatalf("during the outage: task pid %d, want %d", got, pid)
			}
		}
		if err := httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)); err != nil {
			t.Fatalf("during the outage the container stopped answering: %v", err)
		}
		t0 := time.Now()
		e.Restart(t)
		restarted = true
		t.Logf("etcd restarted in %s", time.Since(t0).Round(time.Millisecond))
		t0 = time.Now()
		defer func() { t.Logf("re-reported %s after etcd returned", time.Since(t0).Round(time.Millisecond)) }()
		waitFor(t, 30*time.Second, func() string {
			if _, mod := observed(t, s, id, "state"); mod <= rev {
				return "state not re-reported after etcd returned"
			}
			if _, mod := observed(t, s, id, "health"); mod <= rev {
				return "health not re-reported after etcd returned"
			}
			return ""
		})
		if got := taskPid(t, cli, id); got != pid {
			t.Fatalf("after the outage: task pid %d, want %d", got, pid)
		}
	})

	step("removing the placement stops the container and reports it stopped", func(t *testing.T) {
		if _, err := s.Commit(context.Background(), facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement(id)), facts.Delete(facts.NodePlacement("node-1", id))}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, func() string {
			if st, _ := observed(t, s, id, "state"); st != "stopped" {
				return "state " + st
			}
			return ""
		})
		if _, err := cli.LoadContainer(context.Background(), id); err == nil {
			t.Fatal("the container still exists")
		}
		if err := syscall.Kill(int(pid), 0); err == nil {
			t.Fatalf("process %d still runs", pid)
		}
	})

	step("a container that ignores SIGTERM is killed after the grace period", func(t *testing.T) {
		const id4 = "c0ffe4"
		sport := etcdtest.FreePort(t)
		put(t, s, facts.DesiredService("stubborn"), map[string]any{}, facts.ServiceImage("stubborn"), "ccattler.test/stubborn:1",
			facts.ServiceExpose("stubborn", sport), map[string]any{})
		put(t, s, facts.InstanceService(id4), "stubborn", facts.Placement(id4), "node-1", facts.NodePlacement("node-1", id4), "stubborn")
		waitFor(t, 30*time.Second, func() string {
			if st, _ := observed(t, s, id4, "state"); st != "running" {
				return "state " + st
			}
			return ""
		})
		start := time.Now()
		if _, err := s.Commit(context.Background(), facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement(id4)), facts.Delete(facts.NodePlacement("node-1", id4))}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, func() string {
			if st, _ := observed(t, s, id4, "state"); st != "stopped" {
				return "state " + st
			}
			return ""
		})
		if took := time.Since(start); took < 3*time.Second {
			t.Fatalf("stopped after %s: before the 3s grace period, so SIGTERM was not ignored or not sent", took)
		}
		if _, err := cli.LoadContainer(context.Background(), id4); err == nil {
			t.Fatal("the container still exists")
		}
	})

	step("a container that exits is reported failed with its exit status, not restarted", func(t *testing.T) {
		const id2 = "c0ffe2"
		put(t, s, facts.InstanceService(id2), "hz", facts.Placement(id2), "node-1", facts.NodePlacement("node-1", id2), "hz")
		var pid2 uint32
		waitFor(t, 30*time.Second, func() string {
			if pid2 = taskPid(t, cli, id2); pid2 == 0 {
				return "no task"
			}
			return ""
		})
		if err := syscall.Kill(int(pid2), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, func() string {
			if st, _ := observed(t, s, id2, "state"); st != "failed" {
				return "state " + st
			}
			if st := raw(t, s, facts.InstanceExitStatus(id2)); st != "137" {
				return fmt.Sprintf("exit status %q, reason %q", st, raw(t, s, facts.InstanceReason(id2)))
			}
			return ""
		})
		time.Sleep(2 * time.Second)
		if taskPid(t, cli, id2) != 0 {
			t.Fatal("the failed container was restarted")
		}
	})

	step("an archive that cannot be imported is reported, naming the file", func(t *testing.T) {
		log, err := os.ReadFile(filepath.Join(stateDir, "agent.log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "import image archive") || !strings.Contains(string(log), "broken.tar") {
			t.Fatalf("no error naming broken.tar in the agent log:\n%s", tail(log, 3000))
		}
	})

	step("a service's command, args and env reach its process; its output is served and followed", func(t *testing.T) {
		put(t, s, facts.DesiredService("echo"), map[string]any{}, facts.ServiceImage("echo"), "ccattler.test/echo:1",
			facts.ServiceCommand("echo"), []any{"/server", "from-command"}, facts.ServiceArgs("echo"), []any{"one", "two words"},
			facts.ServiceEnv("echo", "GREETING"), "hello from the service file", facts.ServiceLabel("echo", "team"), "core",
			facts.ServiceLabel("echo", containerd.LabelInstance), "forged")
		const id5 = "c0ffe5"
		put(t, s, facts.InstanceService(id5), "echo", facts.Placement(id5), "node-1", facts.NodePlacement("node-1", id5), "echo")
		waitFor(t, 30*time.Second, func() string {
			if st, _ := observed(t, s, id5, "state"); st != "running" {
				return "state " + st
			}
			return ""
		})
		if got := raw(t, s, facts.NodeLogs("node-1")); got != cc.LogsAddr {
			t.Fatalf("node-1 reports its logs at %q, want %q", got, cc.LogsAddr)
		}
		url := agent.LogURL(cc.LogsAddr, "node-1", id5, false, false)
		var body string
		waitFor(t, 10*time.Second, func() string {
			resp, err := http.Get(url)
			if err != nil {
				return err.Error()
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if body = string(b); !strings.Contains(body, "tick 1") {
				return fmt.Sprintf("%s: %q", resp.Status, body)
			}
			return ""
		})
		for _, want := range []string{`args: ["from-command" "one" "two words"]`, "GREETING=hello from the service file", "PORT=\n"} {
			if !strings.Contains(body, want) {
				t.Errorf("output lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(body, "image-arg") {
			t.Errorf("the image's own arguments were not replaced:\n%s", body)
		}
		info, err := func() (map[string]string, error) {
			ctr, err := cli.LoadContainer(context.Background(), id5)
			if err != nil {
				return nil, err
			}
			return ctr.Labels(context.Background())
		}()
		if err != nil || info["team"] != "core" || info[containerd.LabelInstance] != id5 {
			t.Errorf("container labels %v (%v): want team=core and the instance label kept", info, err)
		}

		// Follow: lines written after the request arrive on it, and the
		// stream ends once the container is stopped and removed.
		resp, err := http.Get(agent.LogURL(cc.LogsAddr, "node-1", id5, true, false))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		lines := make(chan string, 1000)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		last := 0
		deadline := time.After(20 * time.Second)
		for last < 30 {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the followed stream ended at tick %d", last)
				}
				fmt.Sscanf(l, "tick %d", &last)
			case <-deadline:
				t.Fatalf("followed output stopped at tick %d", last)
			}
		}
		if _, err := s.Commit(context.Background(), facts.Txn{Ops: []facts.Op{facts.Delete(facts.Placement(id5)), facts.Delete(facts.NodePlacement("node-1", id5))}}); err != nil {
			t.Fatal(err)
		}
		ended := time.After(30 * time.Second)
		for done := false; !done; {
			select {
			case _, ok := <-lines:
				done = !ok
			case <-ended:
				t.Fatal("the followed stream did not end after the container was removed")
			}
		}
		// Gone from containerd: no container, no task in the namespace.
		if _, err := cli.LoadContainer(context.Background(), id5); err == nil {
			t.Error("the container still exists")
		}
		tasks, err := cli.TaskService().List(context.Background(), &tasksapi.ListTasksRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks.Tasks {
			if tk.ID == id5 {
				t.Errorf("task %s still listed", id5)
			}
		}
	})

	step("an image that cannot be pulled fails the instance with the reason", func(t *testing.T) {
		put(t, s, facts.DesiredService("nopull"), map[string]any{}, facts.ServiceImage("nopull"), "127.0.0.1:1/nothing:1")
		const id3 = "c0ffe3"
		put(t, s, facts.InstanceService(id3), "nopull", facts.Placement(id3), "node-1", facts.NodePlacement("node-1", id3), "nopull")
		waitFor(t, 60*time.Second, func() string {
			if st, _ := observed(t, s, id3, "state"); st != "failed" {
				return "state " + st
			}
			if r := raw(t, s, facts.InstanceReason(id3)); !strings.Contains(r, "could not be pulled") {
				return "the reason does not say the image could not be pulled: " + r
			}
			return ""
		})
	})
}

func leaseOf(t *testing.T, s *facts.Store, node string) int64 {
	f, ok, err := s.Get(context.Background(), facts.Lease(node))
	if err != nil || !ok {
		return 0
	}
	return f.Lease
}

func currentRev(t *testing.T, s *facts.Store) int64 {
	t.Helper()
	rev, err := s.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// raw returns the stored value of key ("" if absent), as written.
func raw(t *testing.T, s *facts.Store, key string) string {
	t.Helper()
	f, ok, err := s.Get(context.Background(), key)
	if err != nil || !ok {
		return ""
	}
	if v, ok := facts.StringValue(f.Value); ok {
		return v
	}
	return string(f.Value)
}
