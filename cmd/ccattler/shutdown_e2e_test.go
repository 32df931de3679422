package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// costlyRule looks at each metric at great cost, just under the
// per-evaluation CEL limit, and never writes: a round over many metrics
// evaluates for a long time and commits nothing.
func costlyRule() string {
	xs := make([]string, 300)
	for i := range xs {
		xs[i] = strconv.Itoa(i)
	}
	list := "[" + strings.Join(xs, ",") + "]"
	return `rule "costly" {
  doc       = "Looks at every metric at great cost and never writes."
  principal = "autoscaler"
  match {
    m = "observed/service/{name}/metrics/{metric}/{id}"
  }
  # m keeps the comprehension from being folded at load time.
  when = "` + list + `.all(x, ` + list + `.all(y, x + y >= int(m) - 1)) && !name.contains(id) && m < 0.0"
  emit "observed/service/{name}/autoscale/recommendation" {
    value = "1"
  }
}
`
}

// roundPlanned matches the engine's debug line of a planned round.
var roundPlanned = regexp.MustCompile(`msg="engine: round planned".* rev=(\d+)`)

// SIGINT while the engine evaluates a long round ends the server promptly,
// with exit code 0 and a clean "server stopped": the evaluation notices the
// cancellation at its next binding, and the round loop does not go on with
// the work it carried. With the default round budgets the work is cut into
// rounds that commit nothing (the round loop must check for the end between
// them); with no budget it is one round (the evaluation must check).
// Before, the server went on until the whole work was evaluated.
func TestInterruptDuringALongEvaluationExitsPromptly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		budget bool
	}{
		{"default budgets", nil, true},
		{"no budget", []string{"--round-time", "0", "--round-cost", "0"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := t.TempDir()
			if err := os.WriteFile(filepath.Join(pol, "costly.hcl"), []byte(costlyRule()), 0o644); err != nil {
				t.Fatal(err)
			}
			srv, admin := newEngineServer(t, append([]string{"--policies", pol, "--log-level", "debug"}, tc.args...)...)
			store := srv.dial(t)
			waitUntil(t, 30*time.Second, "the engine leads", func() bool { return scrape(t, admin)["ccattler_engine_leading"] == 1 })
			before := scrape(t, admin)["ccattler_engine_rounds_total"]

			// 2,000 bindings in one transaction: minutes of evaluation.
			var puts []facts.Op
			for i := range 2000 {
				puts = append(puts, facts.Put(fmt.Sprintf("observed/service/noise/metrics/cpu/%05x", i), []byte("0.5")))
			}
			rev, err := store.Commit(context.Background(), facts.Txn{Ops: puts, Checked: true})
			if err != nil {
				t.Fatal(err)
			}
			if tc.budget {
				// Rounds cut by the budget follow each other, and the
				// change is not settled: the work is under way.
				waitUntil(t, 60*time.Second, "three rounds over the costly rule", func() bool {
					m := scrape(t, admin)
					return m["ccattler_engine_rounds_total"] >= before+3 && m["ccattler_engine_settled_revision"] < float64(rev)
				})
			} else {
				// One round: the server spends cpu on it (the metrics
				// wait for the round's view to end).
				cpu := processCPU(t, srv.cmd.Process.Pid)
				waitUntil(t, 60*time.Second, "a second of cpu on the round", func() bool {
					return processCPU(t, srv.cmd.Process.Pid)-cpu >= time.Second
				})
				for _, m := range roundPlanned.FindAllStringSubmatch(srv.logText(), -1) {
					if r, _ := strconv.ParseInt(m[1], 10, 64); r >= rev {
						t.Fatalf("the round over the metrics ended before the interrupt: nothing to cut short:\n%s", m[0])
					}
				}
			}

			start := time.Now()
			if err := srv.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case <-srv.exited:
			case <-time.After(60 * time.Second):
				t.Fatalf("the server did not exit within 60s of SIGINT:\n%s", srv.logText())
			}
			took := time.Since(start)
			t.Logf("exited %s after SIGINT", took.Round(time.Millisecond))
			logs := srv.logText()
			if srv.exitCode != 0 {
				t.Errorf("exit code %d, want 0:\n%s", srv.exitCode, logs)
			}
			// Well under the 30s after which a stop is a failure, on a
			// loaded machine too: the round ends at its next binding.
			if took > 10*time.Second {
				t.Errorf("the server took %s to exit after SIGINT:\n%s", took, logs)
			}
			_, after, ok := strings.Cut(logs, `msg="shutting down"`)
			if !ok {
				t.Fatalf("no shutting down line:\n%s", logs)
			}
			if !strings.Contains(after, `msg="server stopped"`) {
				t.Errorf("no server stopped line after shutting down:\n%s", after)
			}
			for _, l := range strings.Split(after, "\n") {
				if strings.Contains(l, "level=ERROR") {
					t.Errorf("an error while shutting down: %s", l)
				}
			}
		})
	}
}

// A server whose embedded etcd has clients with open streams (an agent's
// watch and lease keepalive) stops promptly on SIGINT. etcd's own Close
// waits for every stream to end, up to its request timeout (7s at the
// default election timeout), and a watch never ends of itself: the
// server gives open streams a short grace and then cuts them. The
// agent, whose etcd went away, keeps running and says so.
func TestServerStopsPromptlyWithAgentsConnected(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"secure", nil},
		{"insecure", []string{"--insecure"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newEngineServer(t, append([]string{"--no-engine"}, tc.args...)...)
			startSimNodes(t, srv, 2, "stop-")

			took := srv.stop(t)
			t.Logf("exited %s after SIGINT", took.Round(time.Millisecond))
			if srv.exitCode != 0 {
				t.Errorf("exit code %d, want 0:\n%s", srv.exitCode, srv.logText())
			}
			if took > 4*time.Second {
				t.Errorf("the server took %s to stop with an agent connected, want under 4s:\n%s", took, srv.logText())
			}
		})
	}
}

// A second SIGINT while the server stops gracefully ends it at once, with
// exit code 1 and a line that says so: here the graceful stop waits on an
// etcd that no longer answers (frozen), as a cluster's last server does.
// Before, the signal was swallowed and the stop went on for its timeouts.
func TestSecondInterruptStopsAtOnce(t *testing.T) {
	base := newServer(t, t.TempDir())
	srv := startServer(t, "--etcd", base.client, "--engine-id", "server-1",
		"--admin-addr", fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)))
	waitUntil(t, 30*time.Second, "the engine leads", func() bool { return strings.Contains(srv.logText(), "engine: leading") })

	if err := base.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = base.cmd.Process.Signal(syscall.SIGCONT) })
	first := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// With its etcd frozen, the graceful stop waits out the engine's
	// resignation and the status lease's revoke: a second at least. The
	// second signal comes well after sameSignalWithin, well before that.
	time.Sleep(sameSignalWithin + 150*time.Millisecond)
	select {
	case <-srv.exited:
		t.Fatalf("the server stopped %s after SIGINT with its etcd frozen: nothing left to cut short (exit %d):\n%s",
			time.Since(first).Round(time.Millisecond), srv.exitCode, srv.logText())
	default:
	}
	start := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.exited:
	case <-time.After(5 * time.Second):
		t.Fatalf("the server did not stop within 5s of a second SIGINT:\n%s", srv.logText())
	}
	t.Logf("stopped %s after the second SIGINT", time.Since(start).Round(time.Millisecond))
	if srv.exitCode != 1 {
		t.Errorf("exit code %d after a second SIGINT, want 1", srv.exitCode)
	}
	if !strings.Contains(srv.logText(), "signal received again: stopping at once") {
		t.Errorf("no line says the second signal stopped the server:\n%s", srv.logText())
	}
	if !strings.Contains(srv.logText(), "another stops at once") {
		t.Errorf("the shutting down line does not say a second signal stops at once:\n%s", srv.logText())
	}
}

// A signal delivered twice at once (timeout(1) relays the SIGTERM its
// process group got too; pkill -f may match the wrapper and dev) is one
// stop, not a forced one: dev stops gracefully, exit code 0, and takes its
// client context and its temporary data with it, whether it was still
// starting or running. Taken for a second Ctrl-C, it left the context
// current, pointing every later command at the stopped dev; and a stop
// while starting said "error: context canceled" with exit code 1.
func TestDevTakesADoubleSignalForOne(t *testing.T) {
	for _, running := range []bool{false, true} {
		t.Run(map[bool]string{false: "while starting", true: "once running"}[running], func(t *testing.T) {
			home := t.TempDir()
			cfgPath := filepath.Join(home, "config.hcl")
			env := []string{"HOME=" + home, "CCATTLER_CONFIG=" + cfgPath}
			d := startDev(t, env, "--nodes", "1", "--listen-client", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
				"--listen-peer", fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)), "--admin-addr", "")
			ctxName := d.wait(t, devContextLine)[1]
			data := d.wait(t, regexp.MustCompile(`^ccattler dev: etcd .* data (\S+), \d+ simulated nodes`))[1]
			if running {
				d.wait(t, regexp.MustCompile(`note_leased +observed/node/node-1/leased = true`))
			}
			// Two deliveries, not one the kernel merges: the second after
			// dev has taken the first.
			for i := range 2 {
				if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil && i == 0 {
					t.Fatal(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
			select {
			case <-d.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("dev did not exit within 30s of SIGTERM:\n%s", d.dump())
			}
			if code := d.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("exit code %d after a doubled SIGTERM, want 0:\n%s", code, d.dump())
			}
			if out := d.dump(); strings.Contains(out, "stopping at once") || strings.Contains(out, "error:") {
				t.Errorf("the doubled signal was not a graceful stop:\n%s", out)
			}
			if r := runEnv(t, env, "config", "get-contexts"); strings.Contains(r.stdout, ctxName) {
				t.Errorf("dev's context %s is left:\n%s", ctxName, r.stdout)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("dev's temporary data %s is left: %v", data, err)
			}
		})
	}
}
