package console

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/audit"
)

// testdata/why-endpoint.json is `ccattler why endpoint/service/web/ID -o json`
// of a three-node cluster running the default policies.
func loadGraph(t *testing.T) audit.Graph {
	t.Helper()
	b, err := os.ReadFile("testdata/why-endpoint.json")
	if err != nil {
		t.Fatal(err)
	}
	var g audit.Graph
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

type svgDoc struct {
	Nodes []svgNode
}

// svgNode is a <g>: a node or an edge, by its class.
type svgNode struct {
	Class string     `xml:"class,attr"`
	Attrs []xml.Attr `xml:",any,attr"`
	Path  struct {
		D string `xml:"d,attr"`
	} `xml:"path"`
}

func (n svgNode) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n svgNode) num(name string) float64 {
	f, _ := strconv.ParseFloat(n.attr(name), 64)
	return f
}

func parseSVG(t *testing.T, s string) (doc svgDoc, width, height float64) {
	t.Helper()
	var d struct {
		Width  string    `xml:"width,attr"`
		Height string    `xml:"height,attr"`
		G      []svgNode `xml:"g"`
	}
	if err := xml.Unmarshal([]byte(s), &d); err != nil {
		t.Fatalf("the drawing is not well-formed SVG: %v", err)
	}
	width, _ = strconv.ParseFloat(d.Width, 64)
	height, _ = strconv.ParseFloat(d.Height, 64)
	return svgDoc{Nodes: d.G}, width, height
}

// The drawing of a real why graph has exactly the graph's facts, its
// edges (composed back through the firings), no overlapping boxes, every
// box inside the picture, and every edge pointing downwards.
func TestDrawingOfAWhyGraph(t *testing.T) {
	g := loadGraph(t)
	svg := string(renderGraph(g, nil))
	if dir := os.Getenv("CCATTLER_SCREENSHOTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "why-endpoint.svg"), []byte(svg), 0o644)
	}
	doc, W, H := parseSVG(t, svg)
	var facts []string
	type box struct {
		id             string
		x0, y0, x1, y1 float64
	}
	var boxes []box
	wrote := map[string][]string{}
	var edges []string
	for _, n := range doc.Nodes {
		cls := strings.Fields(n.Class)
		switch {
		case slices.Contains(cls, "node"):
			x, y, w, h := n.num("data-x"), n.num("data-y"), n.num("data-w"), n.num("data-h")
			boxes = append(boxes, box{n.attr("data-id") + n.attr("data-event"), x - w/2, y - h/2, x + w/2, y + h/2})
			if slices.Contains(cls, "fact") {
				facts = append(facts, n.attr("data-id"))
			}
		case slices.Contains(cls, "edge-wrote"):
			wrote[n.attr("data-to")] = append(wrote[n.attr("data-to")], n.attr("data-from"))
		}
	}
	for _, n := range doc.Nodes {
		cls := strings.Fields(n.Class)
		switch {
		case slices.Contains(cls, "edge-because"):
			edges = append(edges, n.attr("data-from")+" -> "+n.attr("data-to"))
		case slices.Contains(cls, "edge-read"):
			for _, f := range wrote[n.attr("data-from")] {
				edges = append(edges, f+" -> "+n.attr("data-to"))
			}
		}
		if slices.Contains(cls, "edge") {
			pts := strings.Fields(strings.NewReplacer("M", "", "L", "").Replace(n.Path.D))
			first, last := pts[0], pts[len(pts)-1]
			y0, _ := strconv.ParseFloat(strings.Split(first, ",")[1], 64)
			y1, _ := strconv.ParseFloat(strings.Split(last, ",")[1], 64)
			if y1 <= y0 {
				t.Errorf("edge %s -> %s does not point down: %s", n.attr("data-from"), n.attr("data-to"), n.Path.D)
			}
		}
	}
	var want []string
	for _, n := range g.Nodes {
		want = append(want, n.ID)
	}
	sort.Strings(want)
	sort.Strings(facts)
	if !slices.Equal(facts, want) {
		t.Errorf("drawn facts %v\nwant %v", facts, want)
	}
	var wantEdges []string
	for _, e := range g.Edges {
		wantEdges = append(wantEdges, e.From+" -> "+e.To)
	}
	sort.Strings(edges)
	sort.Strings(wantEdges)
	if !slices.Equal(slices.Compact(edges), slices.Compact(wantEdges)) {
		t.Errorf("drawn edges %v\nwant %v", edges, wantEdges)
	}
	for i, a := range boxes {
		if a.x0 < 0 || a.y0 < 0 || a.x1 > W || a.y1 > H {
			t.Errorf("%s at (%.0f,%.0f)-(%.0f,%.0f) is outside the %.0fx%.0f picture", a.id, a.x0, a.y0, a.x1, a.y1, W, H)
		}
		for _, b := range boxes[i+1:] {
			if a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 {
				t.Errorf("%s and %s overlap", a.id, b.id)
			}
		}
	}
	t.Logf("%d facts, %d edges drawn in %.0fx%.0f px", len(facts), len(edges), W, H)
}

// A value gone with etcd's compacted history is drawn as such, not as
// absent: the fact existed, its value is what is missing.
func TestDrawingMarksACompactedValue(t *testing.T) {
	g := loadGraph(t)
	i := slices.IndexFunc(g.Nodes, func(n audit.GraphNode) bool { return len(n.Value) > 0 && n.Origin == audit.OriginRule })
	if i < 0 {
		t.Fatal("the graph has no rule-written fact with a value")
	}
	g.Nodes[i].Value, g.Nodes[i].Compacted = nil, 1234
	svg := string(renderGraph(g, nil))
	if !strings.Contains(svg, "(value compacted)") {
		t.Errorf("the drawing does not mark %s's compacted value", g.Nodes[i].ID)
	}
}
