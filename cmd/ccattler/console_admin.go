package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ccattler/ccattler/cmd/ccattler/console"
	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// adminHandler is a handler the admin endpoint serves beside /metrics.
// LoopbackOnly handlers are served only when the endpoint listens on a
// loopback address: they carry no authentication of their own.
type adminHandler struct {
	Pattern      string
	Handler      http.Handler
	LoopbackOnly bool
}

// newConsole returns the web console's admin handler, reading the cluster
// from the mirror and the rule set the engine runs (rs, swapped on reload).
func newConsole(ctx context.Context, store *facts.Store, mirror *facts.Mirror, rs *atomic.Pointer[rules.RuleSet], stats func() engine.Stats) (adminHandler, error) {
	cfg := console.Config{Store: store, Mirror: mirror, Cluster: consoleCluster(mirror, store.Schema),
		Engine: stats, LeaderPrefix: engine.DefaultLeaderPrefix(store.Root)}
	if rs != nil {
		cfg.Rules = rs.Load
	}
	c, err := console.New(ctx, cfg)
	if err != nil {
		return adminHandler{}, err
	}
	return adminHandler{Pattern: console.Prefix, Handler: c, LoopbackOnly: true}, nil
}

// consoleCluster builds the `get` tables from one view of the mirror.
func consoleCluster(mirror *facts.Mirror, schema *facts.Schema) func() console.Cluster {
	return func() console.Cluster {
		w := newWorld()
		mirror.View(func(r facts.Reader) {
			w.rev = r.Rev()
			for _, tree := range getTrees {
				r.Prefix(tree, func(f facts.Fact) bool { w.add(schema, f); return true })
			}
		})
		w.index()
		services := consoleTable(w.services())
		services = withAutoscale(services, w)
		return console.Cluster{Rev: w.rev, Services: services, Nodes: consoleTable(w.nodes()),
			Instances: consoleTable(w.instances(time.Now())), Endpoints: consoleTable(w.endpoints())}
	}
}

// withAutoscale adds the autoscaler's bounds and recommendation to the
// services table: "cpu 0.7 1..10 → 4".
func withAutoscale(t console.Table, w *world) console.Table {
	t.Columns = append(t.Columns, "autoscale")
	for i, row := range t.Rows {
		n := row[0]
		cell := ""
		if m := w.get("desired.service.autoscale.metric", n); m != "" {
			cell = fmt.Sprintf("%s %s %s..%s", m, w.get("desired.service.autoscale.threshold", n),
				w.get("desired.service.autoscale.min", n), w.get("desired.service.autoscale.max", n))
			if rec := w.get("observed.service.autoscale.recommendation", n); rec != "" {
				cell += " → " + rec
			}
		}
		t.Rows[i] = append(row, cell)
	}
	return t
}

// consoleTable is the rows of a `get` table as cells under their json
// names, as printTable prints them.
func consoleTable(rows any) console.Table {
	t := console.Table{Columns: columns(rows)}
	b, err := json.Marshal(rows)
	if err != nil {
		return t
	}
	var objs []map[string]any
	if err := json.Unmarshal(b, &objs); err != nil {
		return t
	}
	for _, o := range objs {
		cells := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			cells[i] = fmt.Sprint(o[c])
			if cells[i] == "/" {
				cells[i] = ""
			}
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}
