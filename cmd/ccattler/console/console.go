// Package console is the read-only web console `ccattler server` serves on
// its admin address under /ui/: the cluster (live, from the mirror), a
// service's and an instance's pages, the why graph of any fact, why-not of
// a pending instance, the firing log and the rule set. It only reads: every
// route answers GET or HEAD, and nothing in it writes to etcd.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/engine"
	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// Prefix is where the console is mounted.
const Prefix = "/ui/"

//go:embed assets
var assets embed.FS

// Table is rows of cells under named columns, as `ccattler get` prints them.
type Table struct {
	Columns []string
	Rows    [][]string
}

// Col returns the index of a column, or -1.
func (t Table) Col(name string) int { return slices.Index(t.Columns, name) }

// Where returns the rows whose column col holds val.
func (t Table) Where(col, val string) Table {
	out := Table{Columns: t.Columns}
	i := t.Col(col)
	for _, r := range t.Rows {
		if i >= 0 && r[i] == val {
			out.Rows = append(out.Rows, r)
		}
	}
	return out
}

// Cluster is the state the cluster page shows, at one mirror revision.
type Cluster struct {
	Rev      int64
	Services Table
	Nodes    Table
	// More builds the instances and endpoints tables of the same
	// revision: the pages of a service or an instance need them, the
	// cluster page does not. Called at most once.
	More func() (instances, endpoints Table)
}

// Config is what the console reads.
type Config struct {
	Store  *facts.Store  // why, why-not, events, rule status
	Mirror *facts.Mirror // the cluster, live
	// Cluster builds the tables from the mirror (the `get` tables).
	Cluster func() Cluster
	// Rules is the running rule set (nil: no engine runs here).
	Rules func() *rules.RuleSet
	// Engine is the engine's counters (nil: no engine runs here).
	Engine func() engine.Stats
	// Affects says whether a change of key can change the cluster tables
	// (nil: every key does); the others (the clock's tick) leave the
	// tables built and the live pages quiet.
	Affects func(key string) bool
	// LeaderPrefix is the election's prefix: `rules status` marks the leader.
	LeaderPrefix string
	Log          *slog.Logger
}

// Console serves the pages. Create it with New.
type Console struct {
	cfg   Config
	pages *template.Template
	mux   *http.ServeMux

	mu      sync.Mutex // guards the fields below
	gen     int64      // counts the changes of the cluster's facts
	changed chan struct{}
	cached  *snapshot

	rounds *sampler
}

// New returns the console; it samples the engine's counters (the rounds
// timeline) until ctx is done.
func New(ctx context.Context, cfg Config) (*Console, error) {
	if cfg.Store == nil || cfg.Mirror == nil || cfg.Cluster == nil {
		return nil, errors.New("console: New needs a store, the mirror and the cluster tables")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	t, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, pages: t, mux: http.NewServeMux(), rounds: newSampler(120), changed: make(chan struct{})}
	go c.follow(ctx, cfg.Mirror.Subscribe())
	if cfg.Engine != nil {
		go c.rounds.run(ctx, cfg.Engine, time.Second)
	}
	static := http.FileServerFS(assets)
	c.mux.Handle("GET /ui/assets/", http.StripPrefix("/ui/", static))
	c.mux.HandleFunc("GET /ui/{$}", c.clusterPage)
	c.mux.HandleFunc("GET /ui/live/cluster", c.liveCluster)
	c.mux.HandleFunc("GET /ui/service", c.servicePage)
	c.mux.HandleFunc("GET /ui/instance", c.instancePage)
	c.mux.HandleFunc("GET /ui/why", c.whyPage)
	c.mux.HandleFunc("GET /ui/api/why", c.whyJSON)
	c.mux.HandleFunc("GET /ui/whynot", c.whyNotPage)
	c.mux.HandleFunc("GET /ui/events", c.eventsPage)
	c.mux.HandleFunc("GET /ui/rules", c.rulesPage)
	return c, nil
}

// ServeHTTP refuses every method but GET and HEAD, and any Host that is
// not a loopback name: a page elsewhere that rebinds its own name to
// 127.0.0.1 must not read the console through a local browser.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the console is read-only: only GET and HEAD are served", http.StatusMethodNotAllowed)
		return
	}
	if !LoopbackHost(r.Host) {
		http.Error(w, fmt.Sprintf("the console answers only to a loopback host name (127.0.0.1, [::1], localhost), not %q", r.Host), http.StatusMisdirectedRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	c.mux.ServeHTTP(w, r)
}

// LoopbackHost reports whether host (host or host:port) names this machine
// by its loopback address or "localhost".
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// snapshot is the cluster at one generation, and its tables as HTML,
// rendered once however many pages and live streams show it.
type snapshot struct {
	Cluster
	gen  int64
	once sync.Once
	html template.HTML
	err  error

	more                 sync.Once
	instances, endpoints Table
}

// tablesMore returns the instances and endpoints tables (built once).
func (s *snapshot) tablesMore() (instances, endpoints Table) {
	s.more.Do(func() {
		if s.More != nil {
			s.instances, s.endpoints = s.More()
		}
	})
	return s.instances, s.endpoints
}

// follow counts the mirror's changes that affect the cluster tables, and
// wakes the live streams on each, until ctx is done.
func (c *Console) follow(ctx context.Context, sub *facts.Subscription) {
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Ready():
		}
		hit := false
		for _, b := range sub.Take() {
			hit = hit || b.Relist
			for _, ch := range b.Changes {
				hit = hit || c.cfg.Affects == nil || c.cfg.Affects(ch.Key)
			}
		}
		if hit {
			c.mu.Lock()
			c.gen++
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
	}
}

// cluster returns the tables as of the latest change, building them when
// a change came since they were last built.
func (c *Console) cluster() *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cached != nil && c.cached.gen == c.gen {
		return c.cached
	}
	c.cached = &snapshot{Cluster: c.cfg.Cluster(), gen: c.gen}
	return c.cached
}

// rowsShown is how many rows of a long table (the cluster's nodes, a
// service's instances and endpoints) a page lists unless asked for all:
// those that want attention first, so that they are never cut off.
const rowsShown = 200

// firstRows returns t with at most n rows: those of the lowest rank first,
// in that order and then by their key (the first column).
func firstRows(t Table, n int, rank func(row []string) int) Table {
	if len(t.Rows) <= n {
		return t
	}
	rows := slices.Clone(t.Rows)
	slices.SortStableFunc(rows, func(a, b []string) int { return rank(a) - rank(b) })
	rows = rows[:n]
	slices.SortStableFunc(rows, func(a, b []string) int { // back in key order, the problems first
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a[0], b[0])
	})
	return Table{Columns: t.Columns, Rows: rows}
}

// clusterView is what the cluster tables show of a snapshot.
type clusterView struct {
	Rev      int64
	Services Table
	Nodes    Table
	AllNodes int            // how many nodes there are
	States   map[string]int // nodes by state
	All      bool           // every node is listed
}

func view(s *snapshot, all bool) clusterView {
	v := clusterView{Rev: s.Rev, Services: s.Services, Nodes: s.Nodes, AllNodes: len(s.Nodes.Rows), States: map[string]int{}, All: all}
	st := s.Nodes.Col("state")
	if st < 0 {
		return v
	}
	for _, r := range s.Nodes.Rows {
		v.States[or(r[st], "unknown")]++
	}
	if !all {
		v.Nodes = firstRows(s.Nodes, rowsShown, func(r []string) int {
			if r[st] != "alive" {
				return 0
			}
			return 1
		})
	}
	return v
}

// InstanceRank orders instances for a reader who looks for trouble, the
// console's service page and describe alike: failed or running unhealthy
// first (0), then pending (1), running (2), and the stopped ones, kept an
// hour after they stop, last (3).
func InstanceRank(state, health string) int {
	switch {
	case state == "failed" || state == "running" && health != "healthy":
		return 0
	case state == "pending" || state == "":
		return 1
	case state == "running":
		return 2
	}
	return 3
}

// instanceRank is InstanceRank of a row of an instances table.
func instanceRank(t Table) func(row []string) int {
	st, health := t.Col("state"), t.Col("health")
	cell := func(r []string, i int) string {
		if i < 0 {
			return ""
		}
		return r[i]
	}
	return func(r []string) int { return InstanceRank(cell(r, st), cell(r, health)) }
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// tables renders the snapshot's tables: the default view once, every
// node's afresh each time.
func (c *Console) tables(s *snapshot, all bool) (template.HTML, error) {
	render := func() (template.HTML, error) {
		var b strings.Builder
		err := c.pages.ExecuteTemplate(&b, "cluster-tables", view(s, all))
		return template.HTML(b.String()), err // html/template escaped it
	}
	if all {
		return render()
	}
	s.once.Do(func() { s.html, s.err = render() })
	return s.html, s.err
}

// wait returns a channel closed at the next change after generation gen
// (already closed when one came since).
func (c *Console) wait(gen int64) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		done := make(chan struct{})
		close(done)
		return done
	}
	return c.changed
}

type page struct {
	Title string
	Nav   string
	Data  any
}

func (c *Console) render(w http.ResponseWriter, name, title, nav string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := c.pages.ExecuteTemplate(w, name, page{Title: title, Nav: nav, Data: data}); err != nil {
		c.cfg.Log.Warn("console: page not rendered", "page", name, "err", err)
	}
}

// fail shows an error as a page with the status code.
func (c *Console) fail(w http.ResponseWriter, code int, err error) {
	w.WriteHeader(code)
	c.render(w, "error.html", "error", "", err.Error())
}

// ---- cluster

func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	all := r.URL.Query().Get("nodes") == "all"
	snap := c.cluster()
	html, err := c.tables(snap, all)
	if err != nil {
		c.fail(w, http.StatusInternalServerError, err)
		return
	}
	c.render(w, "cluster.html", "cluster", "cluster", map[string]any{"Tables": html, "Gen": snap.gen, "All": all})
}

// liveCluster streams the cluster tables as server-sent events: after each
// change of the cluster's facts, at most every liveEvery (changes in
// between are coalesced into the next). A stream opened with ?gen=N, the
// generation its page shows, starts with the first change after it.
func (c *Console) liveCluster(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	last := int64(-1)
	if g, err := strconv.ParseInt(r.URL.Query().Get("gen"), 10, 64); err == nil {
		last = g
	}
	all := r.URL.Query().Get("nodes") == "all"
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	beat := time.NewTicker(15 * time.Second)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
			continue
		case <-c.wait(last):
		}
		snap := c.cluster()
		html, err := c.tables(snap, all)
		if err != nil {
			return
		}
		last = snap.gen
		fmt.Fprintf(w, "event: cluster\nid: %d\n", snap.Rev)
		for _, line := range strings.Split(string(html), "\n") {
			fmt.Fprintf(w, "data: %s\n", line)
		}
		if _, err := fmt.Fprint(w, "\n"); err != nil {
			return
		}
		fl.Flush()
		select { // coalesce a burst of changes into the next send
		case <-r.Context().Done():
			return
		case <-time.After(liveEvery):
		}
	}
}

// liveEvery is the least time between two updates of a live page: a change
// shows within it plus the time the tables take to build.
const liveEvery = 200 * time.Millisecond

// ---- service and instance

type recent struct {
	Events  []audit.Event
	More    bool // older matching records were not read or not shown
	Scanned int  // records read
}

// scanLimit bounds the records the events page reads: a filter that
// matches little says so instead of loading a log of 100,000 records.
// recentLimit bounds the search for the recent firings of a service's or
// an instance's page, which the events page can take further back.
const (
	scanLimit   = 20000
	recentLimit = 3000
)

// newest returns the newest records match accepts, at most n, reading no
// more than limit records; raw, when set, passes over a record whose
// stored bytes cannot match without decoding it.
func (c *Console) newest(ctx context.Context, n, limit int, since time.Time, raw func([]byte) bool, match func(audit.Event) bool) (recent, int64, int, error) {
	var out recent
	rev, read, bad, err := audit.Newest(ctx, c.cfg.Store, audit.Query{Since: since, Raw: raw, Limit: limit}, func(e audit.Event) bool {
		if match(e) {
			if len(out.Events) == n {
				out.More = true
				return false
			}
			out.Events = append(out.Events, e)
		}
		return true
	})
	out.Scanned = read
	if read >= limit {
		out.More = true
	}
	return out, rev, bad, err
}

// firingsTouching returns the newest records that read or wrote under any
// of the prefixes, at most n.
func (c *Console) firingsTouching(ctx context.Context, n int, prefixes ...string) (recent, error) {
	r, _, _, err := c.newest(ctx, n, recentLimit, time.Time{}, audit.Mentions(prefixes...), func(e audit.Event) bool { return touches(e, prefixes) })
	return r, err
}

func touches(e audit.Event, prefixes []string) bool {
	for _, p := range prefixes {
		for _, w := range e.Writes {
			if strings.HasPrefix(w.Key, p) {
				return true
			}
		}
		for _, r := range e.Reads {
			if strings.HasPrefix(r.Key, p) {
				return true
			}
		}
	}
	return false
}

func (c *Console) servicePage(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	if err := facts.CheckSegment("name", name); err != nil {
		c.fail(w, http.StatusBadRequest, fmt.Errorf("service: %w", err))
		return
	}
	cl := c.cluster()
	svc := cl.Services.Where("name", name)
	if len(svc.Rows) == 0 {
		c.fail(w, http.StatusNotFound, fmt.Errorf("service %s is not applied (see the cluster page)", name))
		return
	}
	instances, endpoints := cl.tablesMore()
	insts := instances.Where("service", name)
	prefixes := []string{"desired/service/" + name + "/", "intent/user/service/" + name + "/", "effective/service/" + name + "/",
		"endpoint/service/" + name + "/", "observed/service/" + name + "/"}
	if i := insts.Col("id"); i >= 0 && len(insts.Rows) <= 50 { // a large service's firings are on the events page
		for _, row := range insts.Rows {
			prefixes = append(prefixes, "placement/instance/"+row[i], "observed/instance/"+row[i]+"/")
		}
	}
	evs, err := c.firingsTouching(r.Context(), 30, prefixes...)
	if err != nil {
		c.fail(w, http.StatusServiceUnavailable, err)
		return
	}
	eps := endpoints.Where("service", name)
	data := map[string]any{"Name": name, "Service": svc, "Instances": insts, "Endpoints": eps, "Firings": evs, "Rev": cl.Rev,
		"AllInstances": len(insts.Rows), "AllEndpoints": len(eps.Rows)}
	if r.URL.Query().Get("instances") != "all" {
		data["Instances"] = firstRows(insts, rowsShown, instanceRank(insts))
		data["Endpoints"] = firstRows(eps, rowsShown, func([]string) int { return 0 })
	}
	c.render(w, "service.html", "service "+name, "cluster", data)
}

func (c *Console) instancePage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if err := facts.CheckSegment("instance-id", id); err != nil {
		c.fail(w, http.StatusBadRequest, fmt.Errorf("instance: %w", err))
		return
	}
	cl := c.cluster()
	instances, endpoints := cl.tablesMore()
	inst := instances.Where("id", id)
	if len(inst.Rows) == 0 {
		c.fail(w, http.StatusNotFound, fmt.Errorf("instance %s does not exist", id))
		return
	}
	own := []string{"placement/instance/" + id, "observed/instance/" + id + "/"}
	evs, _, _, err := c.newest(r.Context(), 30, recentLimit, time.Time{}, audit.Mentions(id), func(e audit.Event) bool { return touches(e, own) || writesEndpointOf(e, id) })
	if err != nil {
		c.fail(w, http.StatusServiceUnavailable, err)
		return
	}
	data := map[string]any{"ID": id, "Instance": inst, "Endpoints": endpoints.Where("instance", id), "Firings": evs}
	if _, placed, err := c.cfg.Store.Get(r.Context(), facts.Placement(id)); err == nil && !placed {
		wn, err := c.whyNot(r.Context(), id)
		if err != nil {
			data["WhyNotErr"] = err.Error()
		} else {
			data["WhyNot"] = wn
		}
	} else if placed {
		data["Placement"] = facts.Placement(id)
	}
	c.render(w, "instance.html", "instance "+id, "cluster", data)
}

func writesEndpointOf(e audit.Event, id string) bool {
	for _, w := range e.Writes {
		if strings.HasPrefix(w.Key, "endpoint/service/") && strings.HasSuffix(w.Key, "/"+id) {
			return true
		}
	}
	return false
}

// ---- why

type whyData struct {
	Key   string
	Graph audit.Graph
	SVG   template.HTML
	Depth int
}

// graph is `ccattler why -o json`'s graph: the same two calls.
func (c *Console) graph(ctx context.Context, key string, depth int) (audit.Graph, int, error) {
	if _, err := c.cfg.Store.Schema.Parse(key); err != nil {
		return audit.Graph{}, http.StatusBadRequest, err
	}
	if strings.HasPrefix(key, "auth/") {
		return audit.Graph{}, http.StatusForbidden, fmt.Errorf("%s: the console does not show auth/ (see `ccattler auth list`)", key)
	}
	tree, err := audit.Why(ctx, c.cfg.Store, key, audit.WhyOptions{MaxDepth: depth})
	if err != nil {
		code := http.StatusServiceUnavailable
		if strings.Contains(err.Error(), "does not exist") {
			code = http.StatusNotFound
		}
		return audit.Graph{}, code, err
	}
	return audit.ToGraph(tree), 0, nil
}

func depthOf(r *http.Request) (int, error) {
	s := r.URL.Query().Get("depth")
	if s == "" {
		return 32, nil
	}
	d, err := strconv.Atoi(s)
	if err != nil || d < 1 || d > 64 {
		return 0, fmt.Errorf("depth %q: expected a number from 1 to 64", s)
	}
	return d, nil
}

func (c *Console) whyPage(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	if key == "" {
		c.render(w, "why.html", "why", "why", whyData{})
		return
	}
	depth, err := depthOf(r)
	if err != nil {
		c.fail(w, http.StatusBadRequest, err)
		return
	}
	g, code, err := c.graph(r.Context(), key, depth)
	if err != nil {
		c.fail(w, code, err)
		return
	}
	var rs *rules.RuleSet
	if c.cfg.Rules != nil {
		rs = c.cfg.Rules()
	}
	c.render(w, "why.html", "why "+key, "why", whyData{Key: key, Graph: g, SVG: renderGraph(g, rs), Depth: depth})
}

// whyJSON answers what `ccattler why KEY -o json` prints.
func (c *Console) whyJSON(w http.ResponseWriter, r *http.Request) {
	depth, err := depthOf(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g, code, err := c.graph(r.Context(), r.URL.Query().Get("key"), depth)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	writeJSON(w, g)
}

// ---- why-not

type whyNotData struct {
	ID      string
	Event   audit.Event
	Filters []string // every filter some candidate failed, in order of first appearance
	Rows    []whyNotRow
}

type whyNotRow struct {
	Candidate string
	Failed    []bool // by Filters
	Names     []string
}

func (c *Console) whyNot(ctx context.Context, id string) (*whyNotData, error) {
	e, ok, err := audit.WhyNot(ctx, c.cfg.Store, "id", id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("no rejection is recorded for instance %s: it may not have been considered yet", id)
	}
	d := &whyNotData{ID: id, Event: e}
	// Every filter of the choice, passed or failed, when the running set
	// has the rule; then any the record names that it no longer has.
	if c.cfg.Rules != nil {
		if rs := c.cfg.Rules(); rs != nil {
			for _, r := range rs.Rules {
				if r.Name == e.Rule && r.Choose != nil {
					for _, f := range r.Choose.Filters {
						d.Filters = append(d.Filters, f.Name)
					}
				}
			}
		}
	}
	for _, rj := range e.Rejected {
		for _, f := range rj.Filters {
			if !slices.Contains(d.Filters, f) {
				d.Filters = append(d.Filters, f)
			}
		}
	}
	for _, rj := range e.Rejected {
		row := whyNotRow{Candidate: candidateText(rj.Candidate), Names: rj.Filters}
		for _, f := range d.Filters {
			row.Failed = append(row.Failed, slices.Contains(rj.Filters, f))
		}
		d.Rows = append(d.Rows, row)
	}
	sort.Slice(d.Rows, func(i, j int) bool { return d.Rows[i].Candidate < d.Rows[j].Candidate })
	return d, nil
}

func candidateText(c map[string]string) string {
	if len(c) == 1 {
		for _, v := range c {
			return v
		}
	}
	return audit.BindingText(c)
}

func (c *Console) whyNotPage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if err := facts.CheckSegment("instance-id", id); err != nil {
		c.fail(w, http.StatusBadRequest, fmt.Errorf("why-not: %w", err))
		return
	}
	if p, ok, err := c.cfg.Store.Get(r.Context(), facts.Placement(id)); err != nil {
		c.fail(w, http.StatusServiceUnavailable, err)
		return
	} else if ok {
		c.render(w, "whynot.html", "why-not "+id, "", map[string]any{"ID": id, "Placed": facts.Placement(id), "Node": string(p.Value)})
		return
	}
	d, err := c.whyNot(r.Context(), id)
	if err != nil {
		if _, exists, _ := c.cfg.Store.Get(r.Context(), facts.InstanceService(id)); !exists {
			err = fmt.Errorf("instance %s does not exist", id)
		}
		c.fail(w, http.StatusNotFound, err)
		return
	}
	c.render(w, "whynot.html", "why-not "+id, "", map[string]any{"ID": id, "WhyNot": d})
}

// ---- events

const eventsShown = 200

func (c *Console) eventsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	flt := audit.Filter{Rule: q.Get("rule"), KeyPrefix: q.Get("key")}
	var problems []string
	if s := q.Get("since"); s != "" {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			flt.Since = time.Now().Add(-d)
		} else if t, err := time.Parse(time.RFC3339, s); err == nil {
			flt.Since = t
		} else {
			problems = append(problems, fmt.Sprintf("since %q: expected a duration such as 10m or a time such as 2026-11-29T18:00:00Z", s))
		}
	}
	id := q.Get("event")
	raw := flt.Raw()
	if id != "" {
		raw = nil // an event id is in the key, not the bytes: read them all
	}
	evs, rev, bad, err := c.newest(r.Context(), eventsShown, scanLimit, flt.Since, raw, func(e audit.Event) bool {
		return (id == "" || e.ID == id) && flt.Match(e)
	})
	if err != nil {
		c.fail(w, http.StatusServiceUnavailable, err)
		return
	}
	c.render(w, "events.html", "events", "events", map[string]any{
		"Events": evs.Events, "Recent": evs, "Shown": len(evs.Events), "Bad": bad, "Rev": rev, "Problems": problems,
		"Rule": flt.Rule, "Key": flt.KeyPrefix, "Since": q.Get("since"), "Event": id,
		"Rounds": c.rounds.snapshot(), "Engine": c.cfg.Engine != nil, "Limit": scanLimit})
}

// ---- rules

func (c *Console) rulesPage(w http.ResponseWriter, r *http.Request) {
	sts, _, err := reload.ReadStatus(r.Context(), c.cfg.Store, c.cfg.LeaderPrefix)
	if err != nil {
		c.fail(w, http.StatusServiceUnavailable, err)
		return
	}
	var rs *rules.RuleSet
	if c.cfg.Rules != nil {
		rs = c.cfg.Rules()
	}
	type ruleRow struct {
		Name, Where, Doc, Principal, Text string
		file                              string
		line                              int
	}
	var rows []ruleRow
	if rs != nil {
		for _, rl := range rs.Rules {
			src, _ := findRule(rs, rl.Name)
			rows = append(rows, ruleRow{Name: rl.Name, Where: fmt.Sprintf("%s:%d", rl.File, rl.Range.Start.Line), Doc: rl.Doc,
				Principal: rl.Principal, Text: src.Text, file: rl.File, line: rl.Range.Start.Line})
		}
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].file != rows[j].file {
				return rows[i].file < rows[j].file
			}
			return rows[i].line < rows[j].line
		})
	}
	var version string
	if rs != nil {
		version = rs.Version
	}
	c.render(w, "rules.html", "rules", "rules", map[string]any{"Status": sts, "Rules": rows, "Version": version})
}
