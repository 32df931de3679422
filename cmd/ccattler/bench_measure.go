package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// freeLoopbackURLs returns n URLs http://127.0.0.1:PORT, each a different
// port free right now.
func freeLoopbackURLs(n int) ([]string, error) {
	var urls []string
	for range n {
		ln, port, err := reservePort("127.0.0.1")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		defer ln.Close()
		urls = append(urls, "http://127.0.0.1:"+port)
	}
	return urls, nil
}

func cpuCount() int { return goruntime.NumCPU() }

// cpuTime is the process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcCPUTime is the runtime's estimate of the CPU time its collector has
// spent so far: marking in the background and in assists, and its pauses
// (runtime/metrics /cpu/classes/gc/total:cpu-seconds).
func gcCPUTime() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return time.Duration(s[0].Value.Float64() * float64(time.Second))
}

// procStatus reads a "kB" field of /proc/self/status (VmHWM: peak RSS,
// VmRSS: RSS now, RssAnon and RssFile: its anonymous and file-backed
// parts) in bytes; 0 where there is no /proc.
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// memoryNow is what the process's RSS is made of at one moment: its
// anonymous memory (the heap, goroutine stacks, the runtime's own) and the
// file pages it maps (the binary, etcd's database), as the kernel counts
// them, and of the first what the goroutines' stacks take.
type memoryNow struct {
	anon, file, stacks, goroutines int64
}

func readMemory() memoryNow {
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(s)
	m := memoryNow{anon: procStatus("RssAnon"), file: procStatus("RssFile")}
	if s[0].Value.Kind() == metrics.KindUint64 {
		m.stacks = int64(s[0].Value.Uint64())
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		m.goroutines = int64(s[1].Value.Uint64())
	}
	return m
}

// loadAverage is the machine's 1-minute load average; 0 without /proc.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}

// heapSampler records the largest heap seen (runtime/metrics, no
// stop-the-world) every 50ms until ctx is done: peak is every object on
// the heap, garbage not yet collected included; peakLive is the most the
// collector found live after a cycle, what the process needs at least.
// With profile set it writes a heap profile there each time the live heap
// has grown by a tenth since the last one, so that the file ends up
// holding what was live at the peak, when it can differ from what is
// live once converged (the profile reflects the latest completed cycle).
type heapSampler struct {
	peak, peakLive atomic.Int64
	profile        string
	err            error // the first failure to write profile; read after run returns
}

func (h *heapSampler) run(ctx context.Context) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	var profiled int64
	for {
		metrics.Read(s)
		if v := int64(s[0].Value.Uint64()); v > h.peak.Load() {
			h.peak.Store(v)
		}
		if v := int64(s[1].Value.Uint64()); v > h.peakLive.Load() {
			h.peakLive.Store(v)
			if h.profile != "" && h.err == nil && v > profiled+profiled/10 {
				h.err = writeProfileNow(h.profile)
				profiled = v
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gcSettings are the collector's GOGC percent and soft memory limit in
// force (math.MaxInt64: no limit).
func gcSettings() (percent, limit int64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}

// rawPrefix is where the raw put loop writes: outside the fact root, so
// neither the mirror nor the engine sees it.
const rawPrefix = "/ccattler-bench-raw/"

// rawPuts runs a loop of transactions of batch puts of new keys, each value
// the size of a typical fact value, against the store's etcd for about d,
// then deletes what it wrote. It returns keys committed per second.
func rawPuts(ctx context.Context, s *facts.Store, batch int, d time.Duration) (float64, int64, error) {
	raw := s.WithRoot(rawPrefix)                   // no facts: nothing to validate (Checked)
	val := []byte(`{"ip":"10.1.2.3","port":8080}`) // an endpoint: among the larger facts
	var keys int64
	start := time.Now()
	ops := make([]facts.Op, batch)
	for time.Since(start) < d {
		for i := range ops {
			ops[i] = facts.Put(fmt.Sprintf("%010d", keys+int64(i)), val)
		}
		if _, err := raw.Commit(ctx, facts.Txn{Ops: ops, Checked: true}); err != nil {
			return 0, keys, fmt.Errorf("raw etcd put loop: %w", err)
		}
		keys += int64(batch)
	}
	rate := float64(keys) / time.Since(start).Seconds()
	if _, err := raw.Commit(ctx, facts.Txn{Ops: []facts.Op{{Key: "", Prefix: true}}}); err != nil {
		return rate, keys, fmt.Errorf("raw etcd put loop: clean up %s: %w", rawPrefix, err)
	}
	return rate, keys, nil
}

// mirrorFacts copies every fact of m, in key order, and the revision they
// are at: what a measurement or a check works on without holding the
// mirror.
func mirrorFacts(m *facts.Mirror) (all []facts.Fact, rev int64) {
	m.View(func(r facts.Reader) {
		rev = r.Rev()
		all = make([]facts.Fact, 0, r.Len())
		r.Prefix("", func(f facts.Fact) bool { all = append(all, f); return true })
	})
	return all, rev
}

// tableOverhead measures what a facts.Table — the mirror's storage — holds
// per fact beyond the key and value bytes. The mirror's facts go to a file
// in dir and a child process (`ccattler bench weigh`) indexes them on a heap
// that holds nothing else: weighed here, what etcd, the engine and the
// simulated nodes keep meanwhile was counted too (at 100,000 instances 347
// to 455 bytes in three runs; 233 for as many facts alone).
func tableOverhead(ctx context.Context, m *facts.Mirror, dir string) (perFact float64, kvBytes float64, n int, err error) {
	all, _ := mirrorFacts(m)
	if len(all) == 0 {
		return 0, 0, 0, nil
	}
	var kv int64
	for _, f := range all {
		kv += int64(len(f.Key) + len(f.Value))
	}
	path := filepath.Join(dir, "mirror.facts")
	if err := writeFacts(path, all); err != nil {
		return 0, 0, 0, err
	}
	defer os.Remove(path)
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, 0, err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, "bench", "weigh", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, 0, fmt.Errorf("ccattler bench weigh %s: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	var w weighResult
	if err := json.Unmarshal(out, &w); err != nil {
		return 0, 0, 0, fmt.Errorf("ccattler bench weigh %s: %w: %q", path, err, out)
	}
	return w.BytesPerFact, float64(kv) / float64(len(all)), len(all), nil
}

// weighResult is what `ccattler bench weigh` prints.
type weighResult struct {
	Facts        int     `json:"facts"`
	BytesPerFact float64 `json:"bytes_per_fact"`
}

// writeFacts writes facts to path in the form readFacts reads.
func writeFacts(path string, all []facts.Fact) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	// In slices: gob builds each value whole in memory, and the facts
	// encoded whole raised the bench's RSS by 445 MB at 10,000 instances.
	enc := gob.NewEncoder(w)
	for chunk := range slices.Chunk(all, 4096) {
		if err := enc.Encode(chunk); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func readFacts(path string) ([]facts.Fact, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []facts.Fact
	dec := gob.NewDecoder(bufio.NewReader(f))
	for {
		var chunk []facts.Fact
		err := dec.Decode(&chunk)
		if errors.Is(err, io.EOF) {
			return all, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		all = append(all, chunk...)
	}
}

// weighTable indexes all in fresh tables and returns the heap they take
// per fact, the key and value bytes aside (all holds those already).
func weighTable(all []facts.Fact) float64 {
	// A small cluster's table is lost in the noise of the runtime: index
	// it several times over, about 200,000 facts a sample, and take the
	// least of three samples.
	copies := max(1, 200000/len(all))
	schema := facts.NewSchema() // plugin registrations stay in these tables
	var samples []float64
	for range 3 {
		before := liveHeap()
		tables := make([]*facts.Table, copies)
		for i := range tables {
			tables[i] = facts.NewTable(schema)
			for _, f := range all {
				tables[i].Put(f)
			}
		}
		after := liveHeap()
		goruntime.KeepAlive(tables)
		samples = append(samples, float64(after-before)/float64(copies*len(all)))
	}
	goruntime.KeepAlive(all)
	return slices.Min(samples)
}

func liveHeap() int64 {
	goruntime.GC()
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// percentile of sorted durations, in milliseconds (nearest rank).
func percentileMS(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted)) + 0.5)
	i = min(max(i-1, 0), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Millisecond)
}

func sortedCopy(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}
