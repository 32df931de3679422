package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// interruptChildEnv makes the test binary the child of
// TestForcedStopRunsItsCleanups: it holds stopOnInterrupt as dev does and
// signals itself.
const interruptChildEnv = "CCATTLER_INTERRUPT_CHILD"

// A second signal, past the window in which it is the first one delivered
// twice, runs the forced cleanups in order and exits with code 1; one
// within the window only ends the context. The child process is the test
// binary itself, since the forced stop exits.
func TestForcedStopRunsItsCleanups(t *testing.T) {
	if dir := os.Getenv(interruptChildEnv); dir != "" {
		ctx, _ := stopOnInterrupt(context.Background(), os.Stderr,
			func() { _ = os.WriteFile(filepath.Join(dir, "1"), nil, 0o644) },
			func() { _ = os.WriteFile(filepath.Join(dir, "2"), nil, 0o644) })
		self, _ := os.FindProcess(os.Getpid())
		_ = self.Signal(syscall.SIGINT)
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		_ = self.Signal(syscall.SIGINT) // within the window: the same one
		time.Sleep(sameSignalWithin)
		_ = os.WriteFile(filepath.Join(dir, "survived"), nil, 0o644) // not forced by it
		_ = self.Signal(syscall.SIGINT)
		time.Sleep(10 * time.Second)
		os.Exit(4) // not forced
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestForcedStopRunsItsCleanups$")
	cmd.Env = append(os.Environ(), interruptChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("child exit code %d (%v), want 1 (4: the signal past the window did not force the stop):\n%s", code, err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "survived")); err != nil {
		t.Errorf("a second signal within %s of the first forced the stop: %v", sameSignalWithin, err)
	}
	if !strings.Contains(string(out), "interrupt signal received again: stopping at once, exit code 1") {
		t.Errorf("the forced stop did not say so:\n%s", out)
	}
	for _, f := range []string{"1", "2"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("forced cleanup %s did not run: %v", f, err)
		}
	}
}
