package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// getView is what `get` was asked to show: a kind, optional names, and
// filters; every filter must hold for an object to be shown.
type getView struct {
	kind     string   // services, instances, nodes, endpoints, volumes
	names    []string // ids of the kind (services: names; endpoints: their service)
	states   []string // --state, any of them
	node     string   // --node
	service  string   // --service
	selector []labelTerm
}

// labelTerm is one -l term on a service's labels: key=value, key!=value,
// or key (the label is set).
type labelTerm struct {
	key, value string
	op         string // "=", "!=", "exists"
}

func parseSelector(terms []string) ([]labelTerm, error) {
	var out []labelTerm
	for _, arg := range terms {
		for _, t := range strings.Split(arg, ",") {
			t = strings.TrimSpace(t)
			var lt labelTerm
			switch {
			case strings.Contains(t, "!="):
				k, v, _ := strings.Cut(t, "!=")
				lt = labelTerm{key: k, value: v, op: "!="}
			case strings.Contains(t, "=="):
				k, v, _ := strings.Cut(t, "==")
				lt = labelTerm{key: k, value: v, op: "="}
			case strings.Contains(t, "="):
				k, v, _ := strings.Cut(t, "=")
				lt = labelTerm{key: k, value: v, op: "="}
			default:
				lt = labelTerm{key: t, op: "exists"}
			}
			if err := facts.CheckSegment("label", lt.key); err != nil || lt.key == "" {
				return nil, usageError("-l %q: expected key=value, key!=value or key, with a label name as key", t)
			}
			out = append(out, lt)
		}
	}
	return out, nil
}

func (lt labelTerm) match(labels map[string]string) bool {
	v, ok := labels[lt.key]
	switch lt.op {
	case "=":
		return ok && v == lt.value
	case "!=":
		return !ok || v != lt.value
	default:
		return ok
	}
}

// getFilters says which filters each kind takes, and what --state means.
var getFilters = map[string]struct {
	states                []string // --state values; none: no --state
	node, service, labels bool
	nameVar               string // the key variable a name fills, checked as such
}{
	"services":  {labels: true, nameVar: "name"},
	"instances": {states: []string{"pending", "running", "failed", "stopped"}, node: true, service: true, labels: true, nameVar: "instance-id"},
	"nodes":     {states: []string{"alive", "unreachable", "draining"}, nameVar: "node-id"},
	"endpoints": {node: true, service: true, labels: true, nameVar: "name"},
	"volumes":   {states: []string{"attached", "detached", "error"}, node: true, nameVar: "name"},
}

// check refuses a filter the kind does not take, or a value it cannot
// have, as a usage mistake.
func (v *getView) check() error {
	f := getFilters[v.kind]
	for _, n := range v.names {
		if err := facts.CheckSegment(f.nameVar, n); err != nil {
			return usageError("get %s: %v", v.kind, err)
		}
	}
	if len(v.states) > 0 {
		if f.states == nil {
			return usageError("--state: get %s has no state to filter on (instances, nodes and volumes do)", v.kind)
		}
		for _, s := range v.states {
			if !slices.Contains(f.states, s) {
				return usageError("--state %q: %s are %s", s, v.kind, strings.Join(f.states, ", "))
			}
		}
	}
	if v.node != "" && !f.node {
		return usageError("--node: get %s cannot filter by node (instances, endpoints and volumes can)", v.kind)
	}
	if v.service != "" && !f.service {
		return usageError("--service: get %s cannot filter by service (instances and endpoints can)", v.kind)
	}
	if len(v.selector) > 0 && !f.labels {
		return usageError("-l: get %s has no service labels to select on (services, instances and endpoints do)", v.kind)
	}
	return nil
}

// item is one object of the kind in every form get prints it in.
type item struct {
	id                   string // what a name matches
	name                 string // -o name: kind/id
	service, node, state string // what the filters read
	row, wide, typed     any
}

// Wide rows: the table's columns and a few more.
type serviceWide struct {
	serviceRow
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
	Labels string `json:"labels"`
}

type instanceWide struct {
	instanceRow
	CPU     string `json:"cpu"`
	Memory  string `json:"memory"`
	Started string `json:"started"`
	Reason  string `json:"reason"`
}

type nodeWide struct {
	nodeRow
	Address string `json:"address"`
}

// rowTypes are the table row types by kind and wide-ness: an empty table
// still has its column heads.
var rowTypes = map[string][2]reflect.Type{
	"services":  {reflect.TypeFor[serviceRow](), reflect.TypeFor[serviceWide]()},
	"instances": {reflect.TypeFor[instanceRow](), reflect.TypeFor[instanceWide]()},
	"nodes":     {reflect.TypeFor[nodeRow](), reflect.TypeFor[nodeWide]()},
	"endpoints": {reflect.TypeFor[endpointRow](), reflect.TypeFor[endpointRow]()},
	"volumes":   {reflect.TypeFor[volumeRow](), reflect.TypeFor[volumeRow]()},
}

func (w *world) items(kind string, now time.Time) []item {
	var out []item
	switch kind {
	case "services":
		typed := w.servicesJSON()
		for i, r := range w.services() {
			out = append(out, item{id: r.Name, name: "service/" + r.Name, service: r.Name, row: r, typed: typed[i],
				wide: serviceWide{r, w.get("desired.service.resources.cpu", r.Name), w.get("desired.service.resources.memory", r.Name), w.labelsOf(r.Name)}})
		}
	case "instances":
		rows := w.instances(now)
		typed := w.instancesJSONOf(rows, now)
		out = make([]item, 0, len(rows))
		for i, r := range rows {
			out = append(out, item{id: r.ID, name: "instance/" + r.ID, service: r.Service, node: r.Node, state: r.State, row: r, typed: typed[i],
				wide: instanceWide{r, w.get("observed.instance.resources.cpu", r.ID), w.get("observed.instance.resources.memory", r.ID),
					w.get("observed.instance.started_at", r.ID), w.get("observed.instance.reason", r.ID)}})
		}
	case "nodes":
		typed := w.nodesJSON()
		for i, r := range w.nodes() {
			out = append(out, item{id: r.ID, name: "node/" + r.ID, node: r.ID, state: r.State, row: r, typed: typed[i],
				wide: nodeWide{r, w.get("observed.node.address", r.ID)}})
		}
	case "endpoints":
		typed := w.endpointsJSON()
		for i, r := range w.endpoints() {
			node := w.get("observed.instance.node", r.Instance)
			if node == "" {
				node = w.get("placement.instance", r.Instance)
			}
			out = append(out, item{id: r.Service, name: "endpoint/" + r.Service + "/" + r.Instance, service: r.Service, node: node,
				row: r, wide: r, typed: typed[i]})
		}
	case "volumes":
		typed := w.volumesJSON()
		for i, r := range w.volumes() {
			out = append(out, item{id: r.Name, name: "volume/" + r.Name, node: r.AttachedNode, state: r.State, row: r, wide: r, typed: typed[i]})
		}
	}
	return out
}

// selected returns the items every filter passes, and the names asked for
// that match no object.
func (v *getView) selected(w *world, now time.Time) (shown []item, missing []string) {
	found := map[string]bool{}
	for _, it := range w.items(v.kind, now) {
		if len(v.names) > 0 && !slices.Contains(v.names, it.id) {
			continue
		}
		found[it.id] = true
		if len(v.states) > 0 && !slices.Contains(v.states, it.state) ||
			v.node != "" && it.node != v.node ||
			v.service != "" && it.service != v.service {
			continue
		}
		if !slices.ContainsFunc(v.selector, func(lt labelTerm) bool { return !lt.match(w.labels[it.service]) }) {
			shown = append(shown, it)
		}
	}
	for _, n := range v.names {
		if found[n] {
			continue
		}
		if v.kind == "endpoints" && slices.Contains(w.ids["desired.service"], n) {
			continue // a service without endpoints yet
		}
		missing = append(missing, n)
	}
	return shown, slices.Compact(missing)
}

// render prints the items in the --output format, through a buffer: a
// table or list of 100,000 instances written a cell or a line at a time
// made as many writes to the terminal or pipe (1.4 s of 10).
func (v *getView) render(out io.Writer, items []item, watching bool) error {
	bw := bufio.NewWriterSize(out, 64<<10)
	if err := v.write(bw, items, watching); err != nil {
		return err
	}
	return bw.Flush()
}

func (v *getView) write(out io.Writer, items []item, watching bool) error {
	switch g.output {
	case "name":
		for _, it := range items {
			if _, err := fmt.Fprintln(out, it.name); err != nil {
				return err
			}
		}
		return nil
	case "json", "yaml":
		typed := make([]any, 0, len(items))
		for _, it := range items {
			typed = append(typed, it.typed)
		}
		if g.output == "yaml" {
			return printYAML(out, typed)
		}
		if watching {
			return printJSONLine(out, typed) // one document a line: a stream jq reads
		}
		return printJSON(out, typed)
	}
	wide := g.output == "wide"
	t := rowTypes[v.kind][0]
	if wide {
		t = rowTypes[v.kind][1]
	}
	rows := reflect.MakeSlice(reflect.SliceOf(t), 0, len(items))
	for _, it := range items {
		r := it.row
		if wide {
			r = it.wide
		}
		rows = reflect.Append(rows, reflect.ValueOf(r))
	}
	return printTable(out, rows.Interface())
}

// notFound names the asked-for objects that do not exist: exit 1, as
// kubectl does, after the ones that do were printed.
func (v *getView) notFound(missing []string) error {
	if len(missing) == 0 {
		return nil
	}
	singular := strings.TrimSuffix(v.kind, "s")
	if v.kind == "endpoints" {
		singular = "service"
	}
	q := make([]string, len(missing))
	for i, m := range missing {
		q[i] = strconv.Quote(m)
	}
	return exitError{code: 1, err: fmt.Errorf("%s %s not found", singular, strings.Join(q, ", "))}
}

// show loads the world once and prints the view. A table without rows
// says why on errOut, as a heading alone reads like a listing cut short.
func (v *getView) show(ctx context.Context, s *facts.Store, out, errOut io.Writer) error {
	w, err := v.load(ctx, s)
	if err != nil {
		return err
	}
	items, missing := v.selected(w, time.Now())
	if err := v.render(out, items, false); err != nil {
		return err
	}
	if len(items) == 0 && len(missing) == 0 && tableOutput() {
		fmt.Fprintln(errOut, v.noneShown())
	}
	return v.notFound(missing)
}

// tableOutput reports whether -o asks for a table (table or wide), the
// output meant for a person rather than a script.
func tableOutput() bool { return g.output == "table" || g.output == "wide" }

// noneShown says that the view has no rows, and whether its filters are
// why.
func (v *getView) noneShown() string {
	if len(v.states) > 0 || v.node != "" || v.service != "" || len(v.selector) > 0 || len(v.names) > 0 {
		return fmt.Sprintf("no %s match the filters", v.kind)
	}
	return fmt.Sprintf("no %s", v.kind)
}

// watchRedrawEvery bounds how often get --watch redraws: a burst of writes
// (a rollout of a hundred instances) redraws once a period, not once a write.
const watchRedrawEvery = time.Second

// watch prints the view, then again whenever a fact it is built from
// changes, at most once per watchRedrawEvery and only when the output
// differs, until ctx ends (Ctrl-C: a normal end) or the watch fails. A
// table on a terminal is redrawn in place; any other output gets one
// snapshot after another (json: one a line; yaml: documents split by ---).
func (v *getView) watch(ctx context.Context, s *facts.Store, out io.Writer) error {
	began := time.Now()
	w, err := v.load(ctx, s)
	if err != nil {
		return err
	}
	took := time.Since(began)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	failed := make(chan error, len(getTrees))
	for _, tree := range getTrees {
		go func() {
			for resp := range s.WatchChanges(wctx, tree, w.rev+1) {
				if err := resp.Err; err != nil {
					failed <- fmt.Errorf("watch %s: %w", tree, err)
					return
				}
				if slices.ContainsFunc(resp.Changes, func(c facts.Change) bool { return c.Key != facts.Clock() }) {
					select {
					case changed <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	clear := isTerminal(out) && tableOutput()
	var last []byte
	draw := func(w *world) error {
		items, _ := v.selected(w, time.Now())
		var b bytes.Buffer
		if err := v.render(&b, items, true); err != nil {
			return err
		}
		if bytes.Equal(b.Bytes(), last) {
			return nil
		}
		switch {
		case clear:
			io.WriteString(out, "\x1b[H\x1b[2J")
		case last != nil && g.output == "yaml":
			io.WriteString(out, "---\n")
		case last != nil && g.output != "json":
			io.WriteString(out, "\n")
		}
		last = b.Bytes()
		_, err := out.Write(last)
		return err
	}
	if err := draw(w); err != nil {
		return err
	}
	// The next redraw waits a period, and at least as long as this one's
	// read took: a view of 30,000 instances takes seconds to read, and
	// redrawn a second after each read it kept a core busy.
	drawn := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case <-changed:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(drawn.Add(max(watchRedrawEvery, took)))):
		}
		began = time.Now()
		if w, err = v.load(ctx, s); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := draw(w); err != nil {
			return err
		}
		drawn, took = time.Now(), time.Since(began)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func splitHostPort(addr string) (string, int64, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseInt(port, 10, 64)
	return host, p, err
}
