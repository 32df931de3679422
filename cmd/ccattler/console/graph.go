package console

import (
	"fmt"
	"html"
	"html/template"
	"net/url"
	"sort"
	"strings"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// The why graph as drawn: the facts of `ccattler why -o json` (audit.ToGraph)
// as boxes, and the firing that wrote each fact as a second kind of node
// between the fact and the facts it read. A JSON edge "F holds because T
// held" is drawn F → firing(F) → T, the second half labelled with the
// revision of T that was read; a fact explained without a firing (an
// agent's report, explained by its placement) keeps its direct edge.
// Every element carries data- attributes naming what it stands for, so the
// drawing can be checked against the JSON.

// firingID names the firing node of an event.
func firingID(event string) string { return "firing:" + event }

// ruleSource is a rule's place and text in the running rule set.
type ruleSource struct {
	File string
	Line int
	Text string
	Doc  string
}

// findRule returns the source of the named rule in rs.
func findRule(rs *rules.RuleSet, name string) (ruleSource, bool) {
	if rs == nil {
		return ruleSource{}, false
	}
	for _, r := range rs.Rules {
		if r.Name != name {
			continue
		}
		src := ruleSource{File: r.File, Line: r.Range.Start.Line, Doc: r.Doc}
		if f := rs.Sources[r.File]; f != nil {
			if body, ok := f.Body.(*hclsyntax.Body); ok {
				for _, b := range body.Blocks {
					if b.DefRange().Start.Line == r.Range.Start.Line {
						rg := b.Range()
						if rg.End.Byte <= len(f.Bytes) {
							src.Text = string(f.Bytes[rg.Start.Byte:rg.End.Byte])
						}
					}
				}
			}
		}
		return src, true
	}
	return ruleSource{}, false
}

const (
	charW   = 6.6 // the width of a character of the drawing's monospace font
	factH   = 52.0
	firingH = 40.0
)

type drawnNode struct {
	ID, Class string
	Attrs     map[string]string // data- attributes
	Lines     []string
	Title     string
	Link      string
}

type drawnEdge struct {
	From, To, Kind, Label string
}

// drawing turns the graph into the nodes and edges drawn.
func drawing(g audit.Graph, rs *rules.RuleSet) ([]drawnNode, []drawnEdge) {
	var nodes []drawnNode
	var edges []drawnEdge
	byID := map[string]audit.GraphNode{}
	firings := map[string]bool{}
	for _, n := range g.Nodes {
		byID[n.ID] = n
		val := string(n.Value)
		switch {
		case val == "" && n.Compacted > 0: // gone with etcd's compacted history
			val = "(value compacted)"
		case val == "":
			val = "(absent)"
		}
		nodes = append(nodes, drawnNode{ID: n.ID, Class: "fact origin-" + n.Origin,
			Attrs: map[string]string{"id": n.ID, "key": n.Key, "origin": n.Origin},
			Lines: factLines(n, val),
			Title: fmt.Sprintf("%s = %s\n@%d\n%s", n.Key, val, n.Rev, n.Explain),
			Link:  "why?key=" + url.QueryEscape(n.Key)})
	}
	for _, n := range g.Nodes {
		if n.EventID == "" {
			continue
		}
		fid := firingID(n.EventID)
		edges = append(edges, drawnEdge{From: n.ID, To: fid, Kind: "wrote"})
		if firings[fid] {
			continue
		}
		firings[fid] = true
		label := n.Rule
		title := fmt.Sprintf("firing %s of rule %s", n.EventID, n.Rule)
		if n.Origin == audit.OriginApply {
			label = "apply by " + strings.TrimPrefix(n.Explain, "applied by ")
			title = fmt.Sprintf("apply %s: %s", n.EventID, n.Explain)
		} else if n.Origin == audit.OriginAgent {
			title = fmt.Sprintf("report %s: %s", n.EventID, n.Explain)
		}
		second := ""
		switch {
		case len(n.Bindings) > 0:
			second = audit.BindingText(n.Bindings)
		case n.Version != "":
			second = "rules " + n.Version
		case n.Origin == audit.OriginApply:
			second = "event " + n.EventID
		}
		if n.Origin == audit.OriginRule {
			if src, ok := findRule(rs, n.Rule); ok {
				title += fmt.Sprintf("\n%s:%d", src.File, src.Line)
				if rs != nil && n.Version != "" && n.Version != rs.Version {
					title += fmt.Sprintf(" (running set %s; this firing ran %s)", rs.Version, n.Version)
				}
				if src.Text != "" {
					title += "\n\n" + src.Text
				}
			}
		}
		nodes = append(nodes, drawnNode{ID: fid, Class: "firing", Attrs: map[string]string{"event": n.EventID, "rule": n.Rule},
			Lines: []string{label, cut(second, 44)}, Title: title, Link: "events?event=" + url.QueryEscape(n.EventID)})
	}
	readDrawn := map[[2]string]bool{}
	for _, e := range g.Edges {
		from := byID[e.From]
		to := byID[e.To]
		if from.EventID == "" {
			edges = append(edges, drawnEdge{From: e.From, To: e.To, Kind: "because"})
			continue
		}
		k := [2]string{firingID(from.EventID), e.To}
		if readDrawn[k] {
			continue
		}
		readDrawn[k] = true
		edges = append(edges, drawnEdge{From: k[0], To: e.To, Kind: "read", Label: fmt.Sprintf("@%d", to.Rev)})
	}
	return nodes, edges
}

func factLines(n audit.GraphNode, val string) []string {
	if n.Origin == audit.OriginAbsent {
		return []string{n.Key, "read as absent"}
	}
	return []string{n.Key, "= " + cut(val, 48), fmt.Sprintf("@%d · %s", n.Rev, n.Origin)}
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// Leaves (facts nothing explains further: applies, agents' reports, facts
// read as absent) that only one firing read are stacked in a block under
// it, a spine down the block's columns with a tick into each, instead of
// widening their layer: a scheduling firing reads tens of node facts.
const (
	stackMin  = 3  // fewer leaves stay in the layer
	stackRows = 8  // leaves per column of a block
	spine     = 40 // room left of a column for its spine and the labels
	rowGap    = 8.0
)

// block is a stack of leaves, laid out as one node.
type block struct {
	id     string
	leaves []int // indexes into nodes
	colW   float64
	rowH   float64
}

// boxSize is a drawn node's width and height.
func boxSize(n drawnNode) (float64, float64) {
	w := 0
	for _, l := range n.Lines {
		w = max(w, len([]rune(l)))
	}
	h := factH
	switch {
	case n.Class == "firing":
		h = firingH
	case len(n.Lines) == 2:
		h = factH - 14
	}
	return float64(w)*charW + 20, h
}

// renderGraph draws the graph as an SVG element.
func renderGraph(g audit.Graph, rs *rules.RuleSet) template.HTML {
	nodes, edges := drawing(g, rs)
	pos := map[string]int{}
	for i, n := range nodes {
		pos[n.ID] = i
	}
	outdeg, indeg := map[string]int{}, map[string]int{}
	parent := map[string]string{}
	for _, e := range edges {
		outdeg[e.From]++
		indeg[e.To]++
		parent[e.To] = e.From
	}
	// The exclusive leaves of each node, in key order.
	owned := map[string][]int{}
	for i, n := range nodes {
		if n.Class != "firing" && outdeg[n.ID] == 0 && indeg[n.ID] == 1 {
			owned[parent[n.ID]] = append(owned[parent[n.ID]], i)
		}
	}
	inBlock := map[string]*block{} // leaf id -> its block
	var blocks []*block
	for _, n := range nodes { // in node order, so the drawing is stable
		ls := owned[n.ID]
		if len(ls) < stackMin {
			continue
		}
		sort.Slice(ls, func(i, j int) bool { return nodes[ls[i]].Attrs["key"] < nodes[ls[j]].Attrs["key"] })
		b := &block{id: "block:" + n.ID, leaves: ls}
		for _, l := range ls {
			w, h := boxSize(nodes[l])
			b.colW, b.rowH = max(b.colW, w), max(b.rowH, h)
			inBlock[nodes[l].ID] = b
		}
		blocks = append(blocks, b)
	}
	var ln []lnode
	size := map[string][2]float64{}
	for _, n := range nodes {
		w, h := boxSize(n)
		size[n.ID] = [2]float64{w, h}
		if inBlock[n.ID] == nil {
			ln = append(ln, lnode{ID: n.ID, W: w, H: h})
		}
	}
	for _, b := range blocks {
		cols := (len(b.leaves) + stackRows - 1) / stackRows
		rows := min(len(b.leaves), stackRows)
		ln = append(ln, lnode{ID: b.id, W: float64(cols) * (spine + b.colW), H: float64(rows)*(b.rowH+rowGap) + rowGap})
	}
	var le []ledge
	laid := map[[2]string]bool{}
	for _, e := range edges {
		to := e.To
		if b := inBlock[to]; b != nil {
			to = b.id
		}
		if k := [2]string{e.From, to}; !laid[k] {
			laid[k] = true
			le = append(le, ledge{From: e.From, To: to})
		}
	}
	p := layout(ln, le)
	route := map[[2]string][]point{}
	for i, e := range le {
		route[[2]string{e.From, e.To}] = p.Routes[i]
	}
	// Place the leaves of each block, and route their edges down its spine.
	center := map[string]point{}
	for id, c := range p.Pos {
		center[id] = c
	}
	for _, b := range blocks {
		bc := p.Pos[b.id]
		var bw, bh float64
		for _, n := range ln {
			if n.ID == b.id {
				bw, bh = n.W, n.H
			}
		}
		left, top := bc.X-bw/2, bc.Y-bh/2
		for i, l := range b.leaves {
			col, row := i/stackRows, i%stackRows
			w := size[nodes[l].ID][0]
			x := left + float64(col)*(spine+b.colW) + spine
			y := top + rowGap + float64(row)*(b.rowH+rowGap) + b.rowH/2
			center[nodes[l].ID] = point{x + w/2, y}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" class="why" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`, p.W, p.H, p.W, p.H)
	sb.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>`)
	for _, e := range edges {
		fmt.Fprintf(&sb, `<g class="edge edge-%s" data-from="%s" data-to="%s">`, e.Kind, esc(e.From), esc(e.To))
		var pts []point
		labelAt := point{}
		if b := inBlock[e.To]; b != nil {
			pts = append(pts, route[[2]string{e.From, b.id}]...)
			c := center[e.To]
			w := size[e.To][0]
			spineX := c.X - w/2 - spine + 8
			if len(pts) > 0 {
				last := pts[len(pts)-1]
				pts = append(pts, point{spineX, last.Y})
			}
			pts = append(pts, point{spineX, c.Y}, point{c.X - w/2, c.Y})
			labelAt = point{spineX + 2, c.Y - 3}
		} else {
			pts = route[[2]string{e.From, e.To}]
			if len(pts) > 0 {
				last := pts[len(pts)-1]
				labelAt = point{last.X + 4, last.Y - 6}
			}
		}
		if len(pts) == 0 { // a self loop
			c := center[e.From]
			w := size[e.From][0]
			fmt.Fprintf(&sb, `<path d="M%.1f,%.1f c40,-30 40,30 0,10" marker-end="url(#arrow)"/>`, c.X+w/2, c.Y-5)
		} else {
			var d strings.Builder
			for j, pt := range pts {
				if j == 0 {
					fmt.Fprintf(&d, "M%.1f,%.1f", pt.X, pt.Y)
				} else {
					fmt.Fprintf(&d, " L%.1f,%.1f", pt.X, pt.Y)
				}
			}
			fmt.Fprintf(&sb, `<path d="%s" marker-end="url(#arrow)"/>`, d.String())
			if e.Label != "" {
				fmt.Fprintf(&sb, `<text class="label" x="%.1f" y="%.1f">%s</text>`, labelAt.X, labelAt.Y, esc(e.Label))
			}
		}
		sb.WriteString(`</g>`)
	}
	for _, n := range nodes {
		c := center[n.ID]
		w, h := size[n.ID][0], size[n.ID][1]
		fmt.Fprintf(&sb, `<g class="node %s"`, n.Class)
		for _, k := range sortedKeys(n.Attrs) {
			fmt.Fprintf(&sb, ` data-%s="%s"`, k, esc(n.Attrs[k]))
		}
		fmt.Fprintf(&sb, ` data-x="%.1f" data-y="%.1f" data-w="%.1f" data-h="%.1f"><title>%s</title><a href="%s">`, c.X, c.Y, w, h, esc(n.Title), esc(n.Link))
		rx := 4.0
		if n.Class == "firing" {
			rx = h / 2
		}
		fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="%.1f"/>`, c.X-w/2, c.Y-h/2, w, h, rx)
		top := c.Y - h/2 + 15
		if len(n.Lines) == 2 && n.Class != "firing" {
			top = c.Y - h/2 + 14
		}
		for j, l := range n.Lines {
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" class="line%d">%s</text>`, c.X, top+float64(j)*14, j, esc(l))
		}
		sb.WriteString(`</a></g>`)
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // every piece of text in it is escaped above
}

func esc(s string) string { return html.EscapeString(s) }

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
