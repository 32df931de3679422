package agent

import (
	"context"
	"log/slog"
	"math"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// Usage is what a runtime measured of one running container.
type Usage struct {
	ID      string  // instance id
	Service string  // its service
	CPU     float64 // cores used on average since the previous measure
}

// Metered is implemented by runtimes that can measure their containers: the
// containerd runtime from each task's cgroup, the simulated one from a
// synthetic load. The autoscaler follows what it reports.
type Metered interface {
	// Usage returns one entry per running container. The first call may
	// leave out containers it has no earlier measure of.
	Usage(ctx context.Context) ([]Usage, error)
}

// DefaultMetricsInterval is how often metrics are reported unless told otherwise.
const DefaultMetricsInterval = 5 * time.Second

// Metrics reports the usage of every container of its nodes whose runtime is
// Metered, as observed/service/{name}/metrics/cpu/{instance-id} (cores, to a
// thousandth), every Interval. A value is written when it changes, and
// deleted once its container is gone. The keys hold on a lease of their own
// (three intervals, at least 5 s): the metrics of an agent that dies expire
// with it instead of steering the autoscaler. They are keyed by service so
// that the autoscaler reads only what agents write (see
// policies/autoscale.hcl).
type Metrics struct {
	Store    *facts.Store
	Nodes    []NodeConfig
	Interval time.Duration // DefaultMetricsInterval if 0
	MaxBatch int           // operations per transaction; 128 if 0
	Log      *slog.Logger

	have  map[string]string // key -> value as last written, under lease
	lease facts.LeaseID
	lost  atomic.Bool // the lease's keepalive ended: grant a new one, write everything again
}

// Run reports until ctx is done. Failed writes are retried at the next
// interval: metrics are a measure, not a record, and a missed one is
// replaced by the next.
func (m *Metrics) Run(ctx context.Context) {
	every := m.Interval
	if every <= 0 {
		every = DefaultMetricsInterval
	}
	if m.Log == nil {
		m.Log = slog.Default()
	}
	m.have = map[string]string{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := m.report(ctx, max(3*every, 5*time.Second)); err != nil && ctx.Err() == nil {
			m.Log.Warn("report metrics; will retry", "err", err)
		}
	}
}

// ensureLease grants the lease the metrics are written under, once, and again
// after it was lost.
func (m *Metrics) ensureLease(ctx context.Context, ttl time.Duration) error {
	if m.lease != 0 && !m.lost.Load() {
		return nil
	}
	m.lease, m.have = 0, map[string]string{}
	id, err := m.Store.Grant(ctx, ttl)
	if err != nil {
		return err
	}
	ch, err := m.Store.KeepAlive(ctx, id)
	if err != nil {
		return err
	}
	m.lost.Store(false)
	m.lease = id
	go func() {
		for range ch {
		}
		m.lost.Store(true)
	}()
	return nil
}

func (m *Metrics) report(ctx context.Context, ttl time.Duration) error {
	want := map[string]string{}
	for _, n := range m.Nodes {
		mt, ok := n.Runtime.(Metered)
		if !ok {
			continue
		}
		us, err := mt.Usage(ctx)
		if err != nil {
			m.Log.Warn("measure containers", "node", n.ID, "err", err)
			continue
		}
		for _, u := range us {
			if u.Service == "" || math.IsNaN(u.CPU) || u.CPU < 0 {
				continue
			}
			want[facts.ServiceMetric(u.Service, "cpu", u.ID)] = strconv.FormatFloat(math.Round(u.CPU*1000)/1000, 'f', -1, 64)
		}
	}
	if len(want) == 0 && len(m.have) == 0 {
		return nil // nothing measured: no lease needed yet
	}
	if err := m.ensureLease(ctx, ttl); err != nil {
		return err
	}
	var ops []facts.Op
	for k, v := range want {
		if m.have[k] != v {
			ops = append(ops, facts.Op{Key: k, Value: []byte(v), Lease: m.lease})
		}
	}
	for k := range m.have {
		if _, ok := want[k]; !ok {
			ops = append(ops, facts.Delete(k))
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Key < ops[j].Key })
	batch := m.MaxBatch
	if batch <= 0 {
		batch = 128
	}
	for len(ops) > 0 {
		n := min(batch, len(ops))
		if _, err := m.Store.Commit(ctx, facts.Txn{Ops: ops[:n]}); err != nil {
			return err
		}
		for _, o := range ops[:n] {
			if o.Value == nil {
				delete(m.have, o.Key)
			} else {
				m.have[o.Key] = string(o.Value)
			}
		}
		ops = ops[n:]
	}
	return nil
}
