package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ccattler/ccattler/cmd/ccattler/console"
	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newDescribeCmd) }

// describeKinds maps what users type to what is described.
var describeKinds = map[string]string{
	"service": "service", "services": "service", "svc": "service",
	"instance": "instance", "instances": "instance", "inst": "instance",
	"node": "node", "nodes": "node",
}

func newDescribeCmd() *cobra.Command {
	var events int
	cmd := &cobra.Command{
		Use:   "describe service|instance|node NAME",
		Short: "Show everything about one service, instance or node on one screen",
		Long: `Show one object whole, from the facts at one revision:

  service   its desired spec (every desired/service/NAME/ fact), the effective
            instance count and the intents behind it, running/healthy/updated
            counts, the rollout, the autoscaler, the restart policy's failures,
            its instances (state, health, node, age, failure reason), its
            endpoints, why each pending instance is not placed, and the last
            records that touched any of it
  instance  its observed facts, placement, endpoint, why it is not placed
            while pending, and the last records that touched it
  node      its observed facts, whether it holds its lease, the instances on
            it, and the last records that touched it

The records are those of ccattler events (rule firings, applies and agent
reports); the placement explanation is that of ccattler why-not.

The table lists at most 20 instances (failed or unhealthy first, then
pending, running, stopped), 20 endpoints and 20 pending instances (3 with
their rejection whole), and more than 20 facts under one key as one line,
counting the rest and naming the command that lists them. -o json and
-o yaml print everything as one typed document (the shapes of get -o json
inside; docs/cli.md).`,
		Example: `  ccattler describe service web
  ccattler describe instance a8f31 --events 30
  ccattler describe node node-1 -o json | jq .instances`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, ok := describeKinds[args[0]]
			if !ok {
				return usageError("describe: unknown kind %q: expected service, instance or node", args[0])
			}
			name := args[1]
			if err := facts.CheckSegment(map[string]string{"service": "name", "instance": "instance-id", "node": "node-id"}[kind], name); err != nil {
				return usageError("describe %s: %v", kind, err)
			}
			if events < 0 {
				return usageError("--events %d: expected 0 or more", events)
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			d, err := describe(cmd.Context(), s, kind, name, events, time.Now())
			if err != nil {
				return err
			}
			switch g.output {
			case "json":
				return printJSON(cmd.OutOrStdout(), d)
			case "yaml":
				return printYAML(cmd.OutOrStdout(), d)
			}
			return d.print(cmd.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&events, "events", 10, "how many of the last records that touched the object to show")
	return cmd
}

// description is `describe -o json`: the object as `get -o json` shows it,
// its facts by key, and what the records and the scheduler say about it.
type description struct {
	Kind      string            `json:"kind"`
	Name      string            `json:"name"`
	Revision  int64             `json:"revision"`
	Service   *serviceJSON      `json:"service,omitempty"`
	Instance  *instanceJSON     `json:"instance,omitempty"`
	Node      *nodeJSON         `json:"node,omitempty"`
	Facts     []describedFact   `json:"facts"` // every fact of the object, by key
	Intents   []describedFact   `json:"intents,omitempty"`
	Leased    *bool             `json:"leased,omitempty"` // node: holds lease/node/{id} now
	Instances []instanceJSON    `json:"instances"`
	Endpoints []endpointJSON    `json:"endpoints"`
	Pending   []pendingInstance `json:"pending"`
	Events    []audit.Event     `json:"events"`
	Matched   int               `json:"events_matched"` // records that touched it, of which the last Events are shown
	prefixes  []string          // the key trees that make up the object
	trees     keyTrees          // prefixes, to look keys up in
	w         *world
}

type describedFact struct {
	Key   string        `json:"key"`
	Value facts.RawJSON `json:"value"`
}

// pendingInstance is an unplaced instance with the scheduler's last
// rejection record (null: none recorded yet).
type pendingInstance struct {
	Instance  string       `json:"instance"`
	Rejection *audit.Event `json:"rejection"`
}

func describe(ctx context.Context, s *facts.Store, kind, name string, events int, now time.Time) (*description, error) {
	load := loadDescribed
	if kind == "instance" {
		load = loadInstance
	}
	w, err := load(ctx, s, kind, name)
	if err != nil {
		return nil, err
	}
	return describeIn(ctx, s, w, kind, name, events, now)
}

// describeIn describes the object from w, the facts its loader read, and
// the store at w's revision (the intents, the lease, the records).
func describeIn(ctx context.Context, s *facts.Store, w *world, kind, name string, events int, now time.Time) (*description, error) {
	d := &description{Kind: kind, Name: name, Revision: w.rev, w: w, Facts: []describedFact{},
		Instances: []instanceJSON{}, Endpoints: []endpointJSON{}, Pending: []pendingInstance{}, Events: []audit.Event{}}
	all := w.instancesJSON(now)
	switch kind {
	case "service":
		svcs := w.servicesJSON()
		i := slices.IndexFunc(svcs, func(r serviceJSON) bool { return r.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("service %q not found (ccattler get services lists them)", name)
		}
		d.Service = &svcs[i]
		d.prefixes = []string{"desired/service/" + name, "effective/service/" + name, "observed/service/" + name, "endpoint/service/" + name}
		for _, it := range all {
			if it.Service == name {
				d.Instances = append(d.Instances, it)
			}
		}
		intents, _, err := s.List(ctx, "intent/", w.rev)
		if err != nil {
			return nil, err
		}
		for _, f := range intents {
			if strings.Contains(f.Key, "/service/"+name+"/") {
				d.Intents = append(d.Intents, describedFact{f.Key, f.Value})
				d.prefixes = append(d.prefixes, f.Key)
			}
		}
	case "instance":
		i := slices.IndexFunc(all, func(r instanceJSON) bool { return r.ID == name })
		if i < 0 {
			return nil, fmt.Errorf("instance %q not found (ccattler get instances lists them)", name)
		}
		d.Instance = &all[i]
		d.Instances = append(d.Instances, all[i])
	case "node":
		i := slices.IndexFunc(w.nodesJSON(), func(r nodeJSON) bool { return r.ID == name })
		if i < 0 {
			return nil, fmt.Errorf("node %q not found (ccattler get nodes lists them)", name)
		}
		node := w.nodesJSON()[i]
		d.Node = &node
		d.prefixes = []string{"observed/node/" + name, facts.Lease(name)}
		_, held, err := s.Get(ctx, facts.Lease(name))
		if err != nil {
			return nil, err
		}
		d.Leased = &held
		for _, it := range all {
			if it.Node == name {
				d.Instances = append(d.Instances, it)
			}
		}
	}
	if kind != "node" {
		for _, it := range d.Instances {
			d.prefixes = append(d.prefixes, "observed/instance/"+it.ID, facts.Placement(it.ID))
		}
		for _, ep := range w.endpointsJSON() {
			if kind == "service" && ep.Service == name || kind == "instance" && ep.Instance == name {
				d.Endpoints = append(d.Endpoints, ep)
			}
		}
	}
	// The object's own facts, at the world's revision.
	trees := d.prefixes
	if kind == "service" {
		trees = trees[:3] // desired, effective, observed/service: the instances have their own description
	}
	for _, p := range trees {
		fs, _, err := s.List(ctx, p, w.rev)
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			if f.Key == p || strings.HasPrefix(f.Key, p+"/") {
				d.Facts = append(d.Facts, describedFact{f.Key, f.Value})
			}
		}
	}
	d.trees = newKeyTrees(d.prefixes)
	if err := d.records(ctx, s, events); err != nil {
		return nil, err
	}
	return d, nil
}

// loadDescribed reads what a service's or a node's description shows, at
// one revision. A service: the services' trees (its row), its endpoints,
// and its instances; a node: its facts and the instances reported or
// placed on it, enough to count them as the nodes table does. Of the
// instance facts, which etcd does not index by service or node, every one
// is listed but only those of the described object's instances are parsed
// (readInstancesOf): reading every tree took describe 11-13 s at 100,000
// instances.
func loadDescribed(ctx context.Context, s *facts.Store, kind, name string) (*world, error) {
	w := newWorld()
	switch kind {
	case "service":
		for _, tree := range append(slices.Clone(serviceTrees), "endpoint/service/"+name+"/") {
			if err := w.read(ctx, s, tree, nil); err != nil {
				return nil, err
			}
		}
		if err := w.readInstancesOf(ctx, s, name, "", nil); err != nil {
			return nil, err
		}
	case "node":
		own := newKeyTrees([]string{"observed/node/" + name})
		if err := w.read(ctx, s, "observed/node/"+name, own.holds); err != nil {
			return nil, err
		}
		if err := w.readInstancesOf(ctx, s, "", name, nil); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("describe: unknown kind %q", kind)
	}
	w.index()
	return w, nil
}

// loadInstance reads what an instance's description shows, at one
// revision: its facts, its placement, its endpoint. Reading every fact for
// one instance took seconds at 30,000.
func loadInstance(ctx context.Context, s *facts.Store, _, id string) (*world, error) {
	w := newWorld()
	own := newKeyTrees([]string{"observed/instance/" + id, facts.Placement(id)})
	for _, p := range []string{"observed/instance/" + id, facts.Placement(id)} {
		if err := w.read(ctx, s, p, own.holds); err != nil {
			return nil, err
		}
	}
	if svc := w.get("observed.instance.service", id); svc != "" && facts.CheckSegment("name", svc) == nil {
		ep := facts.Endpoint(svc, id)
		if err := w.read(ctx, s, ep, func(k string) bool { return k == ep }); err != nil {
			return nil, err
		}
	}
	w.index()
	return w, nil
}

// records fills in the last records that read or wrote any of the
// object's keys, and the newest rejection of each pending, unplaced
// instance: one pass over the records, newest first. Each record's keys
// are looked up in the object's key trees, not compared with each of
// them: a service of 10,000 instances has 20,000 trees, and comparing
// every key of 60,000 records with each took describe 42 s.
func (d *description) records(ctx context.Context, s *facts.Store, limit int) error {
	unplaced := map[string]int{} // by instance: its index in d.Pending
	for _, it := range d.Instances {
		if it.State != "pending" && it.State != "" || d.w.get("placement.instance", it.ID) != "" {
			continue
		}
		unplaced[it.ID] = len(d.Pending)
		d.Pending = append(d.Pending, pendingInstance{Instance: it.ID})
	}
	// Every key of the object names it or one of its instances: a record
	// whose bytes name none of them is passed over undecoded. Past a few
	// names, each is looked up by word rather than searched for.
	var q audit.Query
	anchors := []string{d.Name}
	if d.Node == nil {
		for _, it := range d.Instances {
			anchors = append(anchors, it.ID)
		}
	}
	if len(anchors) <= describeAnchors {
		q.Raw = audit.Mentions(anchors...)
	} else {
		q.Raw = audit.MentionsName(anchors...)
	}
	var newest []audit.Event
	_, _, _, err := audit.Newest(ctx, s, q, func(e audit.Event) bool {
		if d.trees.touchedBy(e) {
			d.Matched++
			if len(newest) < limit {
				newest = append(newest, e)
			}
		}
		if e.Kind == audit.KindRejection {
			// The newest rejection binding the instance, as why-not finds it.
			if i, ok := unplaced[e.Bindings["id"]]; ok && d.Pending[i].Rejection == nil {
				d.Pending[i].Rejection = &e
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	slices.Reverse(newest)
	d.Events = append(d.Events, newest...)
	return nil
}

// keyTrees is a set of keys, each standing for itself and every key under
// it (desired/service/web holds desired/service/web/image, not
// desired/service/webapp).
type keyTrees map[string]bool

func newKeyTrees(roots []string) keyTrees {
	t := make(keyTrees, len(roots))
	for _, r := range roots {
		t[r] = true
	}
	return t
}

// holds reports whether key is one of the roots or under one: a lookup of
// the key and of each of its ancestors.
func (t keyTrees) holds(key string) bool {
	for {
		if t[key] {
			return true
		}
		i := strings.LastIndexByte(key, '/')
		if i < 0 {
			return false
		}
		key = key[:i]
	}
}

// touchedBy reports whether a record read or wrote a key the trees hold.
func (t keyTrees) touchedBy(e audit.Event) bool {
	return slices.ContainsFunc(e.Writes, func(w facts.EventWrite) bool { return t.holds(w.Key) }) ||
		slices.ContainsFunc(e.Reads, func(r facts.EventRead) bool { return t.holds(r.Key) })
}

func (d *description) print(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	line := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t"+format+"\n", append([]any{k}, args...)...)
	}
	switch {
	case d.Service != nil:
		v := d.Service
		line("Service", "%s", v.Name)
		line("Image", "%s", dash(v.Image))
		line("Labels", "%s", dash(d.w.labelsOf(v.Name)))
		line("Instances", "desired %s, effective %s%s", num(v.Desired), num(v.Effective), d.intentText())
		line("Status", "%d running, %d healthy, %d/%s updated%s", v.Running, v.Healthy, v.Updated, num(v.Target), failingText(v))
		if v.Rollout != nil {
			line("Rollout", "%s: %s on %d of %d%s", v.Rollout.State, v.Rollout.Image, v.Rollout.Updated, v.Rollout.Total, prefixed(": ", v.Rollout.Reason))
		}
		if a := v.Autoscale; a != nil {
			line("Autoscale", "%s at %s per instance, %s to %s instances, recommends %s", a.Metric, floatText(a.Threshold), num(a.Min), num(a.Max), num(a.Recommendation))
		}
	case d.Instance != nil:
		v := d.Instance
		line("Instance", "%s", v.ID)
		line("Service", "%s", dash(v.Service))
		line("Node", "%s", dash(v.Node))
		line("State", "%s%s", dash(v.State), prefixed(", health ", v.Health))
		if v.StartedAt != nil {
			line("Started", "%s (%s ago)", v.StartedAt.Format(time.RFC3339), time.Duration(*v.AgeSeconds)*time.Second)
		}
		if v.Reason != "" {
			line("Reason", "%s%s", v.Reason, prefixed(", exit status ", num(v.ExitStatus)))
		}
	case d.Node != nil:
		v := d.Node
		line("Node", "%s", v.ID)
		line("State", "%s (lease %s)", dash(v.State), map[bool]string{true: "held", false: "not held"}[*d.Leased])
		line("Zone", "%s, %s", dash(v.Zone), dash(v.Arch))
		line("Address", "%s", dash(v.Address))
		line("Cpu", "%s of %s cores free", floatText(v.CPU.Available), floatText(v.CPU.Capacity))
		line("Memory", "%s of %s free", memText(v.Memory.Available), memText(v.Memory.Capacity))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	section := func(title string) { fmt.Fprintf(out, "\n%s:\n", title) }
	section("Facts")
	ftw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	for _, l := range factLines(d.Facts, describeRows) {
		fmt.Fprintf(ftw, "  %s\t%s\n", l[0], l[1])
	}
	ftw.Flush()
	if d.Node == nil || len(d.Instances) > 0 {
		section("Instances")
		itw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
		fmt.Fprintln(itw, "  ID\tSERVICE\tNODE\tSTATE\tHEALTH\tAGE\tREASON")
		shown, left := shownInstances(d.Instances, describeRows)
		for _, it := range shown {
			age := "-"
			if it.AgeSeconds != nil {
				age = (time.Duration(*it.AgeSeconds) * time.Second).String()
			}
			fmt.Fprintf(itw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.ID, dash(it.Service), dash(it.Node), dash(it.State), dash(it.Health), age, dash(it.Reason))
		}
		itw.Flush()
		if left != "" {
			fmt.Fprintf(out, "  … %s: ccattler get instances %s lists every one\n", left, d.instancesFilter())
		}
	}
	if d.Node == nil {
		section("Endpoints")
		for _, ep := range d.Endpoints[:min(len(d.Endpoints), describeRows)] {
			fmt.Fprintf(out, "  %s  %s\n", ep.Instance, ep.Address)
		}
		if n := len(d.Endpoints) - describeRows; n > 0 {
			fmt.Fprintf(out, "  … %d more: ccattler get endpoints %s lists every one\n", n, d.Name)
		}
		if len(d.Endpoints) == 0 {
			fmt.Fprintln(out, "  (none)")
		}
	}
	if len(d.Pending) > 0 {
		section("Why not placed")
		whole := 0
		for i, p := range d.Pending {
			if i == describeRows {
				fmt.Fprintf(out, "  … %d more instances without a placement: ccattler why-not instance ID says why one is not\n", len(d.Pending)-i)
				break
			}
			if p.Rejection == nil {
				fmt.Fprintf(out, "  %s: no rejection recorded yet: it may not have been considered\n", p.Instance)
				continue
			}
			if whole == describeRejections {
				fmt.Fprintf(out, "  %s: rejected by rule %s (event %s): ccattler why-not instance %s\n", p.Instance, p.Rejection.Rule, p.Rejection.ID, p.Instance)
				continue
			}
			whole++
			audit.PrintRejection(out, *p.Rejection)
		}
	}
	section(fmt.Sprintf("Events (the last %d of %d that touched it; ccattler events --key PREFIX for more)", len(d.Events), d.Matched))
	// A record's writes outside the object's keys are counted, not
	// listed: the apply of a file of 600 services wrote 2,400 keys.
	for _, e := range d.Events {
		own := slices.DeleteFunc(slices.Clone(e.Writes), func(w facts.EventWrite) bool { return !d.trees.holds(w.Key) })
		others := len(e.Writes) - len(own)
		e.Writes = own
		if err := printEvent(out, e); err != nil {
			return err
		}
		if others > 0 {
			fmt.Fprintf(out, "    … and %d more %s outside this %s's keys (ccattler events shows the record whole)\n", others, plural(others, "write", "writes"), d.Kind)
		}
	}
	return nil
}

// describeRows is the most instances, endpoints, pending instances, or
// facts under one key, that describe's table lists: a service of 10,000
// instances fits a screen. The rest are counted, with the command that
// lists them; -o json and -o yaml list every one. describeRejections is
// how many pending instances' rejections it prints whole, one line per
// candidate node; the others get one line each.
const (
	describeRows       = 20
	describeRejections = 3
)

// describeAnchors is the most names (the object's and its instances')
// whose mention a record's bytes are searched for one by one before it is
// decoded; past it, the record's words are looked up among them
// (audit.MentionsName).
const describeAnchors = 64

// factLines are the fact table's rows: a fact's key and value, or for
// more than n facts under one key (a service's per-instance metrics) one
// row that counts them.
func factLines(fs []describedFact, n int) [][2]string {
	parent := func(k string) string { return k[:max(strings.LastIndexByte(k, '/'), 0)] }
	under := map[string]int{}
	for _, f := range fs {
		under[parent(f.Key)]++
	}
	var lines [][2]string
	done := map[string]bool{}
	for _, f := range fs {
		p := parent(f.Key)
		if under[p] <= n {
			lines = append(lines, [2]string{f.Key, string(f.Value)})
			continue
		}
		if !done[p] {
			done[p] = true
			lines = append(lines, [2]string{p + "/*", fmt.Sprintf("%d facts: ccattler facts get %s/ lists them", under[p], p)})
		}
	}
	return lines
}

// shownInstances picks at most n instances to list, kept in their order,
// and says how many it left out and in which states ("" when none). It
// picks them in console.InstanceRank's order: those that want attention
// first (one failed among thousands running is what a reader looks for),
// the stopped last.
func shownInstances(insts []instanceJSON, n int) ([]instanceJSON, string) {
	if len(insts) <= n {
		return insts, ""
	}
	pick := make([]bool, len(insts))
	picked := 0
	for r := 0; r <= 3 && picked < n; r++ {
		for i, it := range insts {
			if picked < n && console.InstanceRank(it.State, it.Health) == r {
				pick[i] = true
				picked++
			}
		}
	}
	var shown []instanceJSON
	states := map[string]int{}
	for i, it := range insts {
		if pick[i] {
			shown = append(shown, it)
		} else {
			states[dash(it.State)]++
		}
	}
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, fmt.Sprintf("%d %s", states[st], st))
	}
	return shown, fmt.Sprintf("%d more (%s)", len(insts)-n, strings.Join(parts, ", "))
}

// instancesFilter is the get instances filter that lists the described
// object's instances.
func (d *description) instancesFilter() string {
	if d.Node != nil {
		return "--node " + d.Name
	}
	return "--service " + d.Name
}

func (d *description) intentText() string {
	var parts []string
	for _, f := range d.Intents {
		layer := strings.SplitN(strings.TrimPrefix(f.Key, "intent/"), "/", 2)[0]
		parts = append(parts, layer+" "+string(f.Value))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (intents: " + strings.Join(parts, ", ") + ")"
}

func failingText(v *serviceJSON) string {
	if v.Status != "failing" {
		return ""
	}
	return fmt.Sprintf("; failing: %d failures in a row%s", v.Failures, prefixed(", last: ", v.Reason))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func prefixed(p, s string) string {
	if s == "" || s == "-" {
		return ""
	}
	return p + s
}

func num(n *int64) string {
	if n == nil {
		return "-"
	}
	return fmt.Sprint(*n)
}

func floatText(f *float64) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprint(*f)
}

func memText(n *int64) string {
	if n == nil {
		return "-"
	}
	return facts.FormatMemory(*n)
}
