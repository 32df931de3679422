package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newGetCmd) }

// getKinds maps what users type, singular or plural, to a table.
var getKinds = map[string]string{
	"service": "services", "services": "services", "svc": "services",
	"instance": "instances", "instances": "instances", "inst": "instances",
	"node": "nodes", "nodes": "nodes",
	"endpoint": "endpoints", "endpoints": "endpoints", "ep": "endpoints",
	"volume": "volumes", "volumes": "volumes", "vol": "volumes",
}

func newGetCmd() *cobra.Command {
	var (
		v      getView
		labels []string
		watch  bool
	)
	cmd := &cobra.Command{
		Use:   "get services|instances|nodes|endpoints|volumes [NAME...]",
		Short: "Show services, instances, nodes, endpoints or volumes as tables",
		Long: `Show the state of the cluster, built from the facts in etcd at one revision.

  services   name, image, desired/effective instances, running and healthy counts, ports,
             "failing" with the failures in a row and the last reason while instances fail,
             else "unplaced" with how many wait for a placement,
             updated/target (running, healthy instances on the current image) and
             the rollout's state while instances run an older image
  instances  id, service, node, state, health, ip, image, age
  nodes      id, state, zone, architecture, cpu and memory (capacity/available), instances
  endpoints  service, instance, address
  volumes    name, size, persistent, access mode, attached node, state

Singular forms (service, instance, ...) work too. NAMEs narrow the list to
those objects (endpoints: to those services); a NAME that does not exist
is an error (exit 1) after the rest are printed. --state, --node,
--service and -l narrow it further; a table left without rows says so on
stderr ("no volumes", "no instances match the filters"). -w keeps it on
screen, redrawn as the cluster changes.

-o json and -o yaml print typed objects — counts as numbers, cpu in cores,
memory and sizes in bytes, times in RFC 3339 — in the shapes docs/cli.md
documents; -o wide adds columns; -o name prints kind/name, one a line.`,
		Example: `  ccattler get services
  ccattler get services web api -o json
  ccattler get instances --state running,pending --service web
  ccattler get instances -l tier=front -w
  ccattler get nodes -o name | xargs -n1 ccattler describe`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("get: expected one of services, instances, nodes, endpoints, volumes")
			}
			kind, ok := getKinds[args[0]]
			if !ok {
				return usageError("get: unknown kind %q: expected one of services, instances, nodes, endpoints, volumes", args[0])
			}
			v.kind, v.names = kind, args[1:]
			sel, err := parseSelector(labels)
			if err != nil {
				return err
			}
			v.selector = sel
			if err := v.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			if watch {
				var stop context.CancelFunc
				ctx, stop = stopOnInterrupt(ctx, cmd.ErrOrStderr())
				defer stop()
			}
			s, err := g.dial(ctx)
			if err != nil {
				return err
			}
			defer s.Close()
			if watch {
				return v.watch(ctx, s, cmd.OutOrStdout())
			}
			return v.show(ctx, s, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&v.states, "state", nil, "only objects in these states, comma-separated (instances: pending, running, failed, stopped; nodes: alive, unreachable, draining; volumes: attached, detached, error)")
	f.StringVar(&v.node, "node", "", "only instances, endpoints or volumes on this node")
	f.StringVar(&v.service, "service", "", "only instances or endpoints of this service")
	f.StringArrayVarP(&labels, "selector", "l", nil, "only services (and their instances and endpoints) whose labels match: key=value, key!=value or key; repeat or comma-separate to require all")
	f.BoolVarP(&watch, "watch", "w", false, "keep printing the view, redrawn (at most once a second) as the facts behind it change")
	return cmd
}

// world is the facts the tables are built from, grouped by the variable
// that identifies each thing: service or volume name, instance id, node id.
type world struct {
	rev int64
	// checked: the facts come from a mirror, which checked each against
	// the schema when it arrived (Fact.Invalid); else add checks them.
	checked bool
	attrs   map[string]map[string]string // "type.name" -> id -> display value
	ids     map[string][]string          // fact type name -> ids having it, sorted
	eps     []endpointRow                // in key order: by service, then instance
	// raw holds the stored values that keep to the schema, as attrs does
	// (get_typed.go reads them as numbers, quantities and times); bad the
	// keys whose values break it; labels the services' labels.
	raw    map[string]map[string][]byte
	bad    []string
	labels map[string]map[string]string
	// summaries, when set, are the services' instance counts as the engine
	// keeps them (get_summary.go): the instance facts were not read.
	summaries map[string]instanceCounts
}

// getTrees are the key trees the tables read.
var getTrees = []string{"desired/", "effective/", "observed/", "placement/", "endpoint/"}

func loadWorld(ctx context.Context, s *facts.Store) (*world, error) {
	return loadTrees(ctx, s, getTrees)
}

// loadTrees reads the trees at one revision, the first one's.
func loadTrees(ctx context.Context, s *facts.Store, trees []string) (*world, error) {
	w := newWorld()
	for _, tree := range trees {
		if err := w.read(ctx, s, tree, nil); err != nil {
			return nil, err
		}
	}
	w.index()
	return w, nil
}

// read adds the facts under prefix whose keys keep holds (nil: every one),
// at the world's revision: the first read's.
func (w *world) read(ctx context.Context, s *facts.Store, prefix string, keep func(key string) bool) error {
	fs, rev, err := s.List(ctx, prefix, w.rev)
	if err != nil {
		return err
	}
	w.rev = rev
	for _, f := range fs {
		if keep == nil || keep(f.Key) {
			w.add(s.Schema, f)
		}
	}
	return nil
}

func newWorld() *world {
	return &world{attrs: map[string]map[string]string{}, ids: map[string][]string{},
		raw: map[string]map[string][]byte{}, labels: map[string]map[string]string{}}
}

// add files one fact under its type and id; facts of no known type, and
// singletons, describe nothing a table shows.
func (w *world) add(schema *facts.Schema, f facts.Fact) {
	k, err := schema.Parse(f.Key)
	if err != nil {
		return // a fact of an unknown type has no column
	}
	// A value that breaks the schema is shown as such, never as
	// data: the rules treat it as absent.
	bad := w.check(schema, f)
	w.record(k, f, bad != nil)
	if k.Type.Name == "endpoint.service" {
		addr := address(f.Value)
		if bad != nil {
			addr = invalidCell(f.Value)
		}
		w.eps = append(w.eps, endpointRow{Service: k.Args[0], Instance: k.Args[1], Address: addr})
		return
	}
	if len(k.Args) == 0 {
		return // a singleton such as observed/clock describes no object
	}
	id := k.Args[0]
	m := w.attrs[k.Type.Name]
	if m == nil {
		m = map[string]string{}
		w.attrs[k.Type.Name] = m
	}
	if _, seen := m[id]; !seen {
		w.ids[k.Type.Name] = append(w.ids[k.Type.Name], id)
	}
	switch {
	case bad != nil:
		m[id] = invalidCell(f.Value)
	case k.Type.Name == "desired.service.expose":
		m[id] = joinNonEmpty(m[id], k.Args[1])
	default:
		m[id] = display(f.Value)
	}
}

func (w *world) check(schema *facts.Schema, f facts.Fact) error {
	if !w.checked {
		_, err := schema.CheckFact(f)
		return err
	}
	if f.Invalid != "" {
		return errors.New(f.Invalid)
	}
	return nil
}

// index sorts, once every fact is added, the ids having each fact type:
// facts added in key order (as listed) leave them sorted already.
func (w *world) index() {
	for _, ids := range w.ids {
		if !slices.IsSorted(ids) {
			slices.Sort(ids)
		}
	}
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

// display renders a stored value for a table cell: strings without quotes.
func display(raw []byte) string {
	if s, ok := facts.StringValue(raw); ok {
		return s
	}
	return string(raw)
}

// invalidCell renders a value that breaks the schema: marked, and cut short.
func invalidCell(raw []byte) string {
	v := display(raw)
	if len(v) > 24 {
		v = strings.ToValidUTF8(v[:24], "") + "…"
	}
	return "invalid(" + strconv.QuoteToGraphic(v) + ")"
}

func address(raw []byte) string {
	var v struct {
		IP   string      `json:"ip"`
		Port json.Number `json:"port"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.IP == "" {
		return string(raw)
	}
	return net.JoinHostPort(v.IP, v.Port.String())
}

// get returns one attribute of a thing, or "" when the fact is absent.
func (w *world) get(factType, id string) string { return w.attrs[factType][id] }

// union returns the ids having any of the fact types, sorted.
func (w *world) union(types ...string) []string {
	var out []string
	for _, t := range types {
		out = append(out, w.ids[t]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

type serviceRow struct {
	Name      string `json:"name"`
	Image     string `json:"image"`
	Desired   string `json:"desired"`
	Effective string `json:"effective"`
	Running   int    `json:"running"`
	Healthy   int    `json:"healthy"`
	Ports     string `json:"ports"`
	// Updated is "n/target": running, healthy instances on the service's
	// current image of its effective target, a rollout's progress.
	Updated string `json:"updated"`
	// Rollout is the state of observed/service/{name}/rollout (progressing
	// or halted) while instances run an older image; empty otherwise.
	Rollout string `json:"rollout"`
	// Status is "failing" while the restart policy counts failures of the
	// service (observed/service/{name}/restart/failures) and fewer of its
	// instances run than its target; Failures and Reason say how many in a
	// row and the last reason its agent reported. Otherwise it is
	// "unplaced" while instances wait for a placement (the scheduler
	// rejected every candidate, or has not placed them yet), and Reason
	// says how many.
	Status   string `json:"status"`
	Failures string `json:"failures"`
	Reason   string `json:"reason"`
}

func (w *world) services() []serviceRow { return w.serviceRows(w.counts()) }

// serviceRows is services with each service's instance counts (counts).
func (w *world) serviceRows(counts map[string]instanceCounts) []serviceRow {
	rows := []serviceRow{}
	for _, n := range w.ids["desired.service"] {
		ports := strings.Split(w.get("desired.service.expose", n), ",")
		slices.SortFunc(ports, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
		target := w.get("effective.service.instances", n)
		if target == "" {
			target = w.get("desired.service.instances", n)
		}
		var rollout struct {
			State string `json:"state"`
		}
		_ = json.Unmarshal([]byte(w.get("observed.service.rollout", n)), &rollout) // absent: no rollout
		c := counts[n]
		row := serviceRow{Name: n, Image: w.get("desired.service.image", n),
			Desired: w.get("desired.service.instances", n), Effective: w.get("effective.service.instances", n),
			Running: c.Running, Healthy: c.Healthy, Ports: strings.Join(ports, ","),
			Updated: fmt.Sprintf("%d/%s", c.Updated, target), Rollout: rollout.State}
		if f := w.get("observed.service.restart.failures", n); f != "" {
			if want, err := strconv.Atoi(target); err != nil || c.Running < want {
				row.Status, row.Failures, row.Reason = "failing", f, w.get("observed.service.restart.reason", n)
			}
		}
		if row.Status == "" && c.Unplaced > 0 {
			row.Status = "unplaced"
			row.Reason = fmt.Sprintf("%d not placed yet: ccattler describe service %s says why", c.Unplaced, n)
		}
		rows = append(rows, row)
	}
	return rows
}

type instanceRow struct {
	ID      string `json:"id"`
	Service string `json:"service"`
	Node    string `json:"node"`
	State   string `json:"state"`
	Health  string `json:"health"`
	IP      string `json:"ip"`
	Image   string `json:"image"`
	Age     string `json:"age"`
}

func (w *world) instances(now time.Time) []instanceRow {
	ids := w.union("observed.instance", "observed.instance.service", "placement.instance")
	rows := make([]instanceRow, 0, len(ids))
	for _, id := range ids {
		node := w.get("observed.instance.node", id)
		if node == "" {
			node = w.get("placement.instance", id) // placed, not yet reported by its agent
		}
		age := ""
		if t, err := time.Parse(time.RFC3339Nano, w.get("observed.instance.started_at", id)); err == nil {
			age = now.Sub(t).Round(time.Second).String()
		}
		rows = append(rows, instanceRow{ID: id, Service: w.get("observed.instance.service", id), Node: node,
			State: w.get("observed.instance.state", id), Health: w.get("observed.instance.health", id),
			IP: w.get("observed.instance.ip", id), Image: w.get("observed.instance.image", id), Age: age})
	}
	slices.SortStableFunc(rows, func(a, b instanceRow) int { return strings.Compare(a.Service, b.Service) })
	return rows
}

type nodeRow struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Zone      string `json:"zone"`
	Arch      string `json:"arch"`
	CPU       string `json:"cpu"`    // capacity/available
	Memory    string `json:"memory"` // capacity/available
	Instances int    `json:"instances"`
}

func (w *world) nodes() []nodeRow {
	// The instances on a node now: placed there, or reported there pending
	// or running. A stopped or failed one keeps its node, kept an hour as
	// history: counted, a node running 200 showed 13,001 after churn.
	count := map[string]int{}
	for _, id := range w.union("observed.instance.node", "placement.instance") {
		node := w.get("placement.instance", id)
		if st := w.get("observed.instance.state", id); node == "" && (st == "pending" || st == "running") {
			node = w.get("observed.instance.node", id)
		}
		if node != "" {
			count[node]++
		}
	}
	rows := []nodeRow{}
	for _, id := range w.union("observed.node", "observed.node.state") {
		rows = append(rows, nodeRow{ID: id, State: w.get("observed.node.state", id), Zone: w.get("observed.node.zone", id),
			Arch:      w.get("observed.node.architecture", id),
			CPU:       w.get("observed.node.capacity.cpu", id) + "/" + w.get("observed.node.available.cpu", id),
			Memory:    w.get("observed.node.capacity.memory", id) + "/" + w.get("observed.node.available.memory", id),
			Instances: count[id]})
	}
	return rows
}

type endpointRow struct {
	Service  string `json:"service"`
	Instance string `json:"instance"`
	Address  string `json:"address"`
}

func (w *world) endpoints() []endpointRow {
	if w.eps == nil {
		return []endpointRow{}
	}
	return w.eps
}

type volumeRow struct {
	Name         string `json:"name"`
	Size         string `json:"size"`
	Persistent   string `json:"persistent"`
	AccessMode   string `json:"access_mode"`
	AttachedNode string `json:"attached_node"`
	State        string `json:"state"`
}

func (w *world) volumes() []volumeRow {
	rows := []volumeRow{}
	for _, n := range w.union("desired.volume", "observed.volume.state", "observed.volume.attached_node") {
		rows = append(rows, volumeRow{Name: n, Size: w.get("desired.volume.size", n),
			Persistent: w.get("desired.volume.persistent", n), AccessMode: w.get("desired.volume.access_mode", n),
			AttachedNode: w.get("observed.volume.attached_node", n), State: w.get("observed.volume.state", n)})
	}
	return rows
}

// printTable prints a slice of row structs with their json names, upper
// case, as column heads; an empty cell shows as "-".
func printTable(out io.Writer, rows any) error {
	b, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	var objs []map[string]any
	if err := json.Unmarshal(b, &objs); err != nil {
		return err
	}
	cols := columns(rows)
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
	for _, o := range objs {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = fmt.Sprint(o[c])
			if cells[i] == "" || cells[i] == "/" {
				cells[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// columns returns the json names of a row struct's fields, in field order.
func columns(rows any) []string {
	return fieldColumns(reflect.TypeOf(rows).Elem())
}

// fieldColumns flattens embedded structs, as encoding/json does (the
// wide rows embed the narrow ones).
func fieldColumns(t reflect.Type) []string {
	var cols []string
	for i := range t.NumField() {
		if f := t.Field(i); f.Anonymous {
			cols = append(cols, fieldColumns(f.Type)...)
		} else {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			cols = append(cols, name)
		}
	}
	return cols
}
