package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
)

var funcs = template.FuncMap{
	"alloc": alloc,
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	},
	"link":     cellLink,
	"bindings": audit.BindingText,
	"col":      func(t Table, name string) int { return t.Col(name) },
	"cell": func(row []string, i int) string {
		if i < 0 || i >= len(row) || row[i] == "" {
			return "-"
		}
		return row[i]
	},
	"eventTime": func(id string) string {
		if t, ok := facts.EventTime(id); ok {
			return t.Local().Format("15:04:05.000")
		}
		return id
	},
	"barw":   func(f float64) string { return strconv.FormatFloat(80*f, 'f', 1, 64) },
	"step":   func(f float64) int { return int(f*20 + 0.5) }, // the bar's width in 5% steps
	"pct":    func(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) + "%" },
	"rounds": roundsChart,
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// allocation is a node's use of one resource, from a "capacity/available" cell.
type allocation struct {
	Used float64 // fraction of the capacity allocated, 0..1
	Text string
	OK   bool
}

// alloc reads a "capacity/available" cell (cpu as 8/6.5, memory as
// 16Gi/15Gi or in bytes) as the fraction allocated.
func alloc(cell string) allocation {
	c, a, ok := strings.Cut(cell, "/")
	if !ok {
		return allocation{Text: cell}
	}
	capacity, ok1 := quantity(c)
	avail, ok2 := quantity(a)
	if !ok1 || !ok2 || capacity <= 0 {
		return allocation{Text: cell}
	}
	used := min(max((capacity-avail)/capacity, 0), 1)
	return allocation{Used: used, Text: fmt.Sprintf("%s of %s free", a, c), OK: true}
}

var suffixes = []struct {
	s string
	m float64
}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"m", 1e-3}}

func quantity(s string) (float64, bool) {
	s = strings.Trim(strings.TrimSpace(s), `"`)
	m := 1.0
	for _, x := range suffixes {
		if strings.HasSuffix(s, x.s) {
			s, m = strings.TrimSuffix(s, x.s), x.m
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	return f * m, err == nil
}

// sampler keeps the engine's counters once a second: the differences are
// the rounds timeline (firings and rounds per second, commit latency).
type sampler struct {
	mu    sync.Mutex
	size  int
	marks []mark
}

type mark struct {
	At                    time.Time
	Rounds, Firings, Txns int64
	CommitTime, MaxCommit time.Duration
	Leading               bool
}

func newSampler(size int) *sampler { return &sampler{size: size} }

func (s *sampler) run(ctx context.Context, stats func() engine.Stats, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		st := stats()
		s.mu.Lock()
		s.marks = append(s.marks, mark{At: time.Now(), Rounds: st.Rounds, Firings: st.Firings, Txns: st.Txns,
			CommitTime: st.CommitTime, MaxCommit: st.MaxCommitTime, Leading: st.Leading})
		if len(s.marks) > s.size+1 {
			s.marks = s.marks[len(s.marks)-s.size-1:]
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step is one second of the timeline.
type step struct {
	At         time.Time
	Rounds     int64
	Firings    int64
	Txns       int64
	MeanCommit time.Duration // of the transactions in the step
}

func (s *sampler) snapshot() []step {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []step
	for i := 1; i < len(s.marks); i++ {
		a, b := s.marks[i-1], s.marks[i]
		st := step{At: b.At, Rounds: b.Rounds - a.Rounds, Firings: b.Firings - a.Firings, Txns: b.Txns - a.Txns}
		if st.Txns > 0 {
			st.MeanCommit = (b.CommitTime - a.CommitTime) / time.Duration(st.Txns)
		}
		out = append(out, st)
	}
	return out
}

// roundsChart draws the timeline as bars of firings per second, with the
// rounds and mean commit latency of each second in its tooltip.
func roundsChart(steps []step) template.HTML {
	if len(steps) == 0 {
		return `<p class="muted">No samples yet: the timeline fills in once a second.</p>`
	}
	const h, bw = 80.0, 6.0
	peak := int64(1)
	for _, s := range steps {
		peak = max(peak, s.Firings)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="rounds" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`, float64(len(steps))*bw, h+14, float64(len(steps))*bw, h+14)
	for i, s := range steps {
		bh := h * float64(s.Firings) / float64(peak)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.0f" height="%.1f"><title>%s: %d firings, %d rounds, %d commits, mean commit %s</title></rect>`,
			float64(i)*bw, h-bh, bw-1, bh, s.At.Format("15:04:05"), s.Firings, s.Rounds, s.Txns, s.MeanCommit.Round(time.Microsecond))
	}
	fmt.Fprintf(&b, `<text x="0" y="%.0f">peak %d firings/s over the last %d s</text></svg>`, h+12, peak, len(steps))
	return template.HTML(b.String()) // numbers and times only
}

// cellLink is the page a table cell links to ("" for none): a service's
// name, an instance's id, the node an instance runs on.
func cellLink(kind, col, val string) string {
	if val == "" || val == "-" {
		return ""
	}
	switch {
	case kind == "services" && col == "name", kind != "services" && col == "service":
		return "service?name=" + url.QueryEscape(val)
	case kind == "instances" && col == "id", kind == "endpoints" && col == "instance":
		return "instance?id=" + url.QueryEscape(val)
	}
	return ""
}
