package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ccattler/ccattler/facts"
)

// Origins of a fact version, as Why explains them.
const (
	OriginRule    = "rule"    // written by a rule firing; Event says which
	OriginApply   = "apply"   // written by a user's apply
	OriginAgent   = "agent"   // reported by a node agent
	OriginClock   = "clock"   // observed/clock, written by the server
	OriginAbsent  = "absent"  // read as absent (negation, fresh id)
	OriginExpired = "expired" // the record is past retention
	OriginUnknown = "unknown" // no record, and no tree that explains it
)

// Node is one fact version and why it holds.
type Node struct {
	Key     string        `json:"key"`
	Rev     int64         `json:"rev"` // the ModRevision explained; 0: absent
	Value   facts.RawJSON `json:"value,omitempty"`
	Origin  string        `json:"origin"`
	Explain string        `json:"explain"`
	Event   *Event        `json:"event,omitempty"`
	Because []*Node       `json:"because,omitempty"`
	done    bool          // fully explained; the node may be shared by several parents
	stub    bool          // a back reference, not explained again

	// Compacted is set when the value of this version is gone with
	// etcd's history: the revision history before which was compacted.
	// The record that explains the version is a current key and stays.
	Compacted int64 `json:"compacted_before,omitempty"`
}

// WhyOptions bounds the walk.
type WhyOptions struct {
	MaxDepth int // default 32
}

type walker struct {
	ctx     context.Context
	s       *facts.Store
	max     int
	visited map[string]*Node
	oldest  int64
	compact int64 // etcd's compact revision, once a read found it (0: not yet)
}

// Why explains the current value of key: the record that wrote it and,
// recursively, why each fact that firing read held.
func Why(ctx context.Context, s *facts.Store, key string, opt WhyOptions) (*Node, error) {
	if opt.MaxDepth == 0 {
		opt.MaxDepth = 32
	}
	f, ok, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s does not exist (see `ccattler events --key %s` for what deleted it)", key, key)
	}
	oldest, err := oldestRecordRev(ctx, s)
	if err != nil {
		return nil, err
	}
	w := &walker{ctx: ctx, s: s, max: opt.MaxDepth, visited: map[string]*Node{}, oldest: oldest}
	return w.at(key, f.ModRevision, f.Value, 0)
}

func (w *walker) at(key string, rev int64, value []byte, depth int) (*Node, error) {
	id := fmt.Sprintf("%s@%d", key, rev)
	if n, ok := w.visited[id]; ok {
		if n.done {
			return n, nil // shared: the explanation is a DAG
		}
		// A firing that read what it wrote in the same transaction: stop here.
		return &Node{Key: key, Rev: rev, Value: n.Value, Origin: n.Origin, Explain: "(read back its own write)", stub: true}, nil
	}
	n := &Node{Key: key, Rev: rev, Value: value}
	w.visited[id] = n
	defer func() { n.done = true }()
	if rev == 0 {
		n.Origin, n.Explain = OriginAbsent, "did not exist"
		return n, nil
	}
	if value == nil {
		f, ok, err := w.s.GetAt(w.ctx, key, rev)
		switch {
		case err == nil && ok && f.ModRevision == rev:
			n.Value = f.Value
		case errors.Is(err, facts.ErrCompacted):
			w.compacted(n)
		}
	}
	evs, err := atRevision(w.ctx, w.s, rev)
	if err != nil {
		return nil, err
	}
	for i := range evs {
		e := &evs[i]
		if !writes(e, key) {
			continue
		}
		n.Event = e
		switch e.Kind {
		case "apply":
			n.Origin, n.Explain = OriginApply, fmt.Sprintf("applied by %s", or(e.Leader, "a user"))
		case "report":
			n.Origin, n.Explain = OriginAgent, fmt.Sprintf("reported by %s", or(e.Leader, "an agent"))
		default:
			n.Origin, n.Explain = OriginRule, fmt.Sprintf("rule %s", e.Rule)
		}
		if depth >= w.max {
			n.Explain += " (depth limit reached)"
			return n, nil
		}
		for _, r := range e.Reads {
			rrev := r.Rev
			if r.Own && rrev == 0 {
				rrev = e.Rev // written in the same transaction as the record
			}
			c, err := w.at(r.Key, rrev, nil, depth+1)
			if err != nil {
				return nil, err
			}
			n.Because = append(n.Because, c)
		}
		return n, nil
	}
	// No record wrote this version.
	switch {
	case key == facts.Clock():
		n.Origin, n.Explain = OriginClock, "the server's clock (written every second)"
	case strings.HasPrefix(key, "desired/") || strings.HasPrefix(key, "intent/user/"):
		n.Origin, n.Explain = OriginApply, "written by a user (desired/ and intent/user/ are the users' trees)"
	case strings.HasPrefix(key, "observed/instance/") && !isEngineInstanceFact(key, n.Value):
		n.Origin = OriginAgent
		n.Explain = w.instanceAgent(key)
		if depth < w.max {
			if c := w.placementOf(key, depth); c != nil {
				n.Because = append(n.Because, c)
			}
		}
	case strings.HasPrefix(key, "observed/") || strings.HasPrefix(key, "lease/"):
		n.Origin, n.Explain = OriginAgent, "reported by a node agent"
		if k, err := w.s.Schema.Parse(key); err == nil && k.Var("node-id") != "" {
			n.Explain = fmt.Sprintf("reported by the agent of %s", k.Var("node-id"))
		}
	case w.oldest == 0 || rev < w.oldest:
		n.Origin, n.Explain = OriginExpired, "the record of this write is past retention (or was never kept)"
	default:
		n.Origin, n.Explain = OriginUnknown, "no record explains this write"
	}
	return n, nil
}

// compacted fills in the value of n, a version older than etcd's compact
// revision, from the current fact when the version is still the current
// one; otherwise the value is gone and n says since when.
func (w *walker) compacted(n *Node) {
	if f, ok, err := w.s.Get(w.ctx, n.Key); err == nil && ok && f.ModRevision == n.Rev {
		n.Value = f.Value
		return
	}
	if w.compact == 0 {
		w.compact = n.Rev + 1 // at least: the read at n.Rev failed
		if rev, err := w.s.CompactRevision(w.ctx); err == nil {
			w.compact = rev
		}
	}
	n.Compacted = w.compact
}

// Compacted returns etcd's compact revision and how many fact versions of
// the explanation lost their value to it (0: none).
func Compacted(root *Node) (rev int64, n int) {
	seen := map[*Node]bool{}
	var walk func(*Node)
	walk = func(x *Node) {
		if seen[x] {
			return
		}
		seen[x] = true
		if x.Compacted > 0 {
			rev, n = max(rev, x.Compacted), n+1
		}
		for _, c := range x.Because {
			walk(c)
		}
	}
	walk(root)
	return rev, n
}

// isEngineInstanceFact reports the instance facts the instance rule creates
// (service, and state while pending) — those have records; an agent's do not.
func isEngineInstanceFact(key string, value []byte) bool {
	return strings.HasSuffix(key, "/service") || (strings.HasSuffix(key, "/state") && string(value) == `"pending"`)
}

func (w *walker) instanceAgent(key string) string {
	k, err := w.s.Schema.Parse(key)
	if err != nil {
		return "reported by a node agent"
	}
	if f, ok, _ := w.s.Get(w.ctx, facts.InstanceNode(k.Var("instance-id"))); ok {
		if node, ok := facts.StringValue(f.Value); ok {
			return fmt.Sprintf("reported by the agent of %s", node)
		}
	}
	return "reported by a node agent"
}

// placementOf explains an agent's instance report by the placement that put
// the instance on its node: an agent runs only what is placed on it.
func (w *walker) placementOf(key string, depth int) *Node {
	k, err := w.s.Schema.Parse(key)
	if err != nil {
		return nil
	}
	f, ok, err := w.s.Get(w.ctx, facts.Placement(k.Var("instance-id")))
	if err != nil || !ok {
		return nil
	}
	c, err := w.at(f.Key, f.ModRevision, f.Value, depth+1)
	if err != nil {
		return nil
	}
	return c
}

func writes(e *Event, key string) bool {
	for _, wr := range e.Writes {
		if wr.Key == key && !wr.Deleted {
			return true
		}
	}
	return false
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// PrintTree writes the explanation as an indented tree.
func PrintTree(out io.Writer, n *Node) {
	printNode(out, n, "", "", map[*Node]bool{})
}

func printNode(out io.Writer, n *Node, first, rest string, printed map[*Node]bool) {
	val := string(n.Value)
	switch {
	case val == "" && n.Compacted > 0:
		val = "(value compacted)"
	case val == "":
		val = "(absent)"
	}
	line := fmt.Sprintf("%s%s = %s  @%d  ← %s", first, n.Key, val, n.Rev, n.Explain)
	if e := n.Event; e != nil {
		line += fmt.Sprintf(" [event %s", e.ID)
		if e.Version != "" {
			line += ", rules " + e.Version
		}
		if len(e.Bindings) > 0 {
			line += ", " + BindingText(e.Bindings)
		}
		line += "]"
	}
	if printed[n] && len(n.Because) > 0 {
		fmt.Fprintln(out, line+"  (explained above)")
		return
	}
	printed[n] = true
	fmt.Fprintln(out, line)
	// Facts read as absent (negations, optional patterns, fresh ids) are
	// leaves: one line lists them all.
	var kids []*Node
	var absent []string
	for _, c := range n.Because {
		if c.Origin == OriginAbsent {
			absent = append(absent, c.Key)
		} else {
			kids = append(kids, c)
		}
	}
	for i, c := range kids {
		if i == len(kids)-1 && len(absent) == 0 {
			printNode(out, c, rest+"└─ ", rest+"   ", printed)
		} else {
			printNode(out, c, rest+"├─ ", rest+"│  ", printed)
		}
	}
	if len(absent) > 0 {
		fmt.Fprintf(out, "%s└─ read as absent: %s\n", rest, strings.Join(absent, ", "))
	}
}

// BindingText renders bindings as "k=v k=v" in key order.
func BindingText(b map[string]string) string {
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + b[k]
	}
	return strings.Join(parts, " ")
}

// Graph is the explanation as nodes and edges, for -o json.
type Graph struct {
	Root  string      `json:"root"`
	Nodes []GraphNode `json:"nodes"`
	Edges []GraphEdge `json:"edges"`
}

// GraphNode is one fact version; ID is "key@rev".
type GraphNode struct {
	ID       string            `json:"id"`
	Key      string            `json:"key"`
	Rev      int64             `json:"rev"`
	Value    facts.RawJSON     `json:"value,omitempty"`
	Origin   string            `json:"origin"`
	Explain  string            `json:"explain"`
	Rule     string            `json:"rule,omitempty"`
	Version  string            `json:"version,omitempty"`
	EventID  string            `json:"event,omitempty"`
	Bindings map[string]string `json:"bindings,omitempty"`
	// Compacted: the value is gone, history before this revision was compacted.
	Compacted int64 `json:"compacted_before,omitempty"`
}

// GraphEdge says that From holds because To held (the firing read To).
type GraphEdge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ToGraph flattens the tree, one node per fact version.
func ToGraph(root *Node) Graph {
	g := Graph{Root: nodeID(root)}
	seen := map[string]bool{}
	var walk func(n *Node)
	walk = func(n *Node) {
		id := nodeID(n)
		if seen[id] {
			return
		}
		seen[id] = true
		gn := GraphNode{ID: id, Key: n.Key, Rev: n.Rev, Value: n.Value, Origin: n.Origin, Explain: n.Explain, Compacted: n.Compacted}
		if n.Event != nil {
			gn.Rule, gn.Version, gn.EventID, gn.Bindings = n.Event.Rule, n.Event.Version, n.Event.ID, n.Event.Bindings
		}
		g.Nodes = append(g.Nodes, gn)
		for _, c := range n.Because {
			g.Edges = append(g.Edges, GraphEdge{From: id, To: nodeID(c)})
			walk(c)
		}
	}
	walk(root)
	return g
}

func nodeID(n *Node) string { return fmt.Sprintf("%s@%d", n.Key, n.Rev) }
