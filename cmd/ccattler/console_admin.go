package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"strings"
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

// servedOn says whether the handler is served on a listener at addr.
func (h adminHandler) servedOn(addr net.Addr) bool {
	if !h.LoopbackOnly {
		return true
	}
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// newConsole returns the web console's admin handler, reading the cluster
// from the mirror and the rule set the engine runs (rs, swapped on reload).
// Without an admin endpoint (--admin-addr "") there is none, and nothing
// follows the mirror for it.
func newConsole(ctx context.Context, ops opsConfig, store *facts.Store, mirror *facts.Mirror, rs *atomic.Pointer[rules.RuleSet], stats func() engine.Stats) ([]adminHandler, error) {
	if ops.AdminAddr == "" {
		return nil, nil
	}
	cfg := console.Config{Store: store, Mirror: mirror, Cluster: consoleCluster(mirror, store.Schema),
		Engine: stats, LeaderPrefix: engine.DefaultLeaderPrefix(store.Root), Affects: affectsTables}
	if rs != nil {
		cfg.Rules = rs.Load
	}
	c, err := console.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return []adminHandler{{Pattern: console.Prefix, Handler: c, LoopbackOnly: true}}, nil
}

// affectsTables says whether a change of key can change a `get` table: a
// key under the trees they read, but not the clock ticking every second.
func affectsTables(key string) bool {
	if key == facts.Clock() {
		return false
	}
	for _, tree := range getTrees {
		if strings.HasPrefix(key, tree) {
			return true
		}
	}
	return false
}

// consoleCluster builds the `get` tables from one view of the mirror.
func consoleCluster(mirror *facts.Mirror, schema *facts.Schema) func() console.Cluster {
	return func() console.Cluster {
		var cl console.Cluster
		mirror.View(func(r facts.Reader) { cl = clusterOf(r, schema) })
		return cl
	}
}

// clusterOf builds the tables from a consistent view of the facts (the
// mirror's: they are checked against the schema already).
func clusterOf(r facts.Reader, schema *facts.Schema) console.Cluster {
	w := newWorld()
	w.rev, w.checked = r.Rev(), true
	for _, tree := range getTrees {
		r.Prefix(tree, func(f facts.Fact) bool { w.add(schema, f); return true })
	}
	w.index()
	// The world is not changed after this: More may read it later.
	return console.Cluster{Rev: w.rev, Services: withAutoscale(consoleTable(w.services()), w), Nodes: consoleTable(w.nodes()),
		More: func() (console.Table, console.Table) {
			return consoleTable(w.instances(time.Now())), consoleTable(w.endpoints())
		}}
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
// names, as printTable prints them (rows is a slice of a struct of string
// and int fields).
func consoleTable(rows any) console.Table {
	t := console.Table{Columns: columns(rows)}
	v := reflect.ValueOf(rows)
	for i := range v.Len() {
		r := v.Index(i)
		cells := make([]string, r.NumField())
		for j := range cells {
			f := r.Field(j)
			if f.Kind() == reflect.String {
				cells[j] = f.String()
			} else {
				cells[j] = fmt.Sprint(f.Interface())
			}
			if cells[j] == "/" {
				cells[j] = ""
			}
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}
