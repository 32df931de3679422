package main

import (
	"log/slog"
	"math"
	"runtime/debug"
	"testing"
)

// A server sets GOGC=200 and a memory limit of three quarters of the
// machine unless the environment sets them; what the environment sets stays.
func TestTuneGC(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	tuneGC(log)
	if got := debug.SetGCPercent(100); got != serverGCPercent {
		t.Errorf("GC percent %d, want %d", got, serverGCPercent)
	}
	if got, want := debug.SetMemoryLimit(-1), memTotal()/4*3; memTotal() > 0 && got != want {
		t.Errorf("memory limit %d, want %d (3/4 of %d)", got, want, memTotal())
	}

	t.Setenv("GOGC", "77")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetGCPercent(77)
	debug.SetMemoryLimit(1 << 30)
	tuneGC(log)
	if got := debug.SetGCPercent(100); got != 77 {
		t.Errorf("GOGC=77 set: GC percent %d", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT=1GiB set: memory limit %d", got)
	}
}
