package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
)

// serverGCPercent is the collector's target for a server unless GOGC says
// otherwise: the heap may grow to three times what is live between
// collections rather than twice. The engine allocates briskly while it
// evaluates (bindings, candidates, plans) over a large live heap (the
// mirror, kept aggregates): at 10,000 instances the engine's convergence
// used 21% less CPU at 200 than at Go's default of 100, for a third more
// memory (policies' BenchmarkConverge). The whole process's peak RSS
// follows: `ccattler bench --size medium` peaked at 1.0-1.07 GiB with 200
// and 750 MiB with GOGC=100, converging in 5.9-6.0 s and 6.6-7.5 s, and
// GOMEMLIMIT=450MiB held it to 550 MiB for 8.3-8.6 s (docs/engine.md,
// Memory). Throughput is the default here; an operator short of memory
// sets GOGC or GOMEMLIMIT, above what is live (about 300 MiB at medium at
// its peak): below it the collector runs without pause.
const serverGCPercent = 200

// tuneGC sets the collector for a long-running server: GOGC=200 unless
// GOGC is set, and unless GOMEMLIMIT is set a soft memory limit of three
// quarters of the machine's memory, near which the collector works harder
// instead of letting the heap grow by the percentage.
func tuneGC(log *slog.Logger) {
	percent := os.Getenv("GOGC")
	if percent == "" {
		debug.SetGCPercent(serverGCPercent)
		percent = strconv.Itoa(serverGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if total := memTotal(); total > 0 {
			debug.SetMemoryLimit(total / 4 * 3)
		}
	}
	log.Debug("garbage collector", "gc_percent", percent, "memory_limit_bytes", debug.SetMemoryLimit(-1))
}
