package console

import (
	"math"
	"sort"
)

// A layered (Sugiyama-style) drawing of a directed graph, top to bottom:
// every node gets a layer (the longest path from a root), edges that span
// several layers pass through dummy points, the order within each layer is
// improved by barycenter sweeps, and x positions are pulled towards the
// neighbours' while keeping the order and a minimum gap. The why graphs it
// draws have tens of nodes, so the simple quadratic steps are fine.

// lnode is a box to place; W and H are its size in pixels.
type lnode struct {
	ID   string
	W, H float64
}

// ledge is an edge to route, by node id.
type ledge struct{ From, To string }

// point is a position in pixels.
type point struct{ X, Y float64 }

// placed is the layout: the centre of each node, and each edge's points
// from the bottom of From to the top of To (a self loop has none).
type placed struct {
	Pos    map[string]point
	Layer  map[string]int
	Routes [][]point // in the order of the edges given
	W, H   float64
}

const (
	layerGap = 56.0 // vertical space between layers
	nodeGap  = 28.0 // horizontal space between neighbours in a layer
	margin   = 16.0
	dummyW   = 8.0
)

// layout places nodes and routes edges. Cycles (a firing that read its own
// write) are broken by ignoring the edges that close them while layering.
func layout(nodes []lnode, edges []ledge) placed {
	idx := map[string]int{}
	for i, n := range nodes {
		idx[n.ID] = i
	}
	out := make([][]int, len(nodes))
	for _, e := range edges {
		f, ok1 := idx[e.From]
		t, ok2 := idx[e.To]
		if ok1 && ok2 && f != t {
			out[f] = append(out[f], t)
		}
	}
	// Back edges by depth-first search from the nodes in the order given
	// (the root first): those are left out of the layering.
	back := map[[2]int]bool{}
	state := make([]int, len(nodes)) // 0 new, 1 on the stack, 2 done
	var dfs func(v int)
	dfs = func(v int) {
		state[v] = 1
		for _, w := range out[v] {
			switch state[w] {
			case 0:
				dfs(w)
			case 1:
				back[[2]int{v, w}] = true
			}
		}
		state[v] = 2
	}
	for v := range nodes {
		if state[v] == 0 {
			dfs(v)
		}
	}
	// Longest-path layering over the acyclic rest, in topological order.
	indeg := make([]int, len(nodes))
	for v := range out {
		for _, w := range out[v] {
			if !back[[2]int{v, w}] {
				indeg[w]++
			}
		}
	}
	layer := make([]int, len(nodes))
	var queue []int
	for v := range nodes {
		if indeg[v] == 0 {
			queue = append(queue, v)
		}
	}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range out[v] {
			if back[[2]int{v, w}] {
				continue
			}
			layer[w] = max(layer[w], layer[v]+1)
			if indeg[w]--; indeg[w] == 0 {
				queue = append(queue, w)
			}
		}
	}

	// Cells: the nodes and one dummy per layer an edge crosses.
	type cell struct {
		node  int // -1: a dummy
		w, h  float64
		x     float64
		up    []int // cells in the layer above connected to this one
		down  []int
		order float64
	}
	var cells []cell
	for i, n := range nodes {
		cells = append(cells, cell{node: i, w: n.W, h: n.H})
	}
	link := func(a, b int) { cells[a].down = append(cells[a].down, b); cells[b].up = append(cells[b].up, a) }
	cellLayer := append([]int(nil), layer...)
	chains := make([][]int, len(edges)) // the cells each edge passes through
	for ei, e := range edges {
		f, ok1 := idx[e.From]
		t, ok2 := idx[e.To]
		if !ok1 || !ok2 || f == t {
			continue
		}
		top, bot := f, t
		if layer[top] > layer[bot] {
			top, bot = bot, top // drawn against its direction: it closes a cycle
		}
		chain := []int{top}
		prev := top
		for l := layer[top] + 1; l < layer[bot]; l++ {
			cells = append(cells, cell{node: -1, w: dummyW, h: 0})
			cellLayer = append(cellLayer, l)
			d := len(cells) - 1
			link(prev, d)
			chain = append(chain, d)
			prev = d
		}
		if layer[top] == layer[bot] {
			chain = append(chain, bot) // same layer (a cycle's closing edge): a straight line
		} else {
			link(prev, bot)
			chain = append(chain, bot)
		}
		if top != f {
			for i, j := 0, len(chain)-1; i < j; i, j = i+1, j-1 {
				chain[i], chain[j] = chain[j], chain[i]
			}
		}
		chains[ei] = chain
	}
	nl := 0
	for _, l := range cellLayer {
		nl = max(nl, l+1)
	}
	layers := make([][]int, nl)
	for c := range cells {
		layers[cellLayer[c]] = append(layers[cellLayer[c]], c)
	}
	for l := range layers {
		for i, c := range layers[l] {
			cells[c].order = float64(i)
		}
	}
	// Barycenter sweeps, down then up.
	bary := func(c int, nbrs []int) float64 {
		if len(nbrs) == 0 {
			return cells[c].order
		}
		s := 0.0
		for _, n := range nbrs {
			s += cells[n].order
		}
		return s / float64(len(nbrs))
	}
	sortLayer := func(l int, key func(c int) float64) {
		ks := map[int]float64{}
		for _, c := range layers[l] {
			ks[c] = key(c)
		}
		sort.SliceStable(layers[l], func(i, j int) bool { return ks[layers[l][i]] < ks[layers[l][j]] })
		for i, c := range layers[l] {
			cells[c].order = float64(i)
		}
	}
	for range 4 {
		for l := 1; l < nl; l++ {
			sortLayer(l, func(c int) float64 { return bary(c, cells[c].up) })
		}
		for l := nl - 2; l >= 0; l-- {
			sortLayer(l, func(c int) float64 { return bary(c, cells[c].down) })
		}
	}
	// x: pack each layer, then pull towards neighbours a few times.
	pack := func(l int, want func(c int) float64) {
		cs := layers[l]
		for i, c := range cs {
			x := want(c)
			if i > 0 {
				p := cells[cs[i-1]]
				x = math.Max(x, p.x+p.w/2+nodeGap+cells[c].w/2)
			}
			cells[c].x = x
		}
		// Pushing right only drifts a layer; shift it back so that its
		// mean displacement from what it wanted is zero.
		if len(cs) > 0 {
			d := 0.0
			for _, c := range cs {
				d += cells[c].x - want(c)
			}
			d /= float64(len(cs))
			for _, c := range cs {
				cells[c].x -= d
			}
		}
	}
	for l := range layers {
		pack(l, func(c int) float64 { return 0 })
	}
	mean := func(c int, nbrs []int) float64 {
		if len(nbrs) == 0 {
			return cells[c].x
		}
		s := 0.0
		for _, n := range nbrs {
			s += cells[n].x
		}
		return s / float64(len(nbrs))
	}
	for range 6 {
		for l := 1; l < nl; l++ {
			pack(l, func(c int) float64 { return mean(c, cells[c].up) })
		}
		for l := nl - 2; l >= 0; l-- {
			pack(l, func(c int) float64 { return mean(c, cells[c].down) })
		}
	}
	// y: each layer as tall as its tallest node.
	layerH := make([]float64, nl)
	for c := range cells {
		layerH[cellLayer[c]] = math.Max(layerH[cellLayer[c]], cells[c].h)
	}
	layerY := make([]float64, nl) // centre
	y := margin
	for l := range layerH {
		layerY[l] = y + layerH[l]/2
		y += layerH[l] + layerGap
	}
	minX, maxX := math.Inf(1), math.Inf(-1)
	for _, c := range cells {
		minX = math.Min(minX, c.x-c.w/2)
		maxX = math.Max(maxX, c.x+c.w/2)
	}
	if len(cells) == 0 {
		minX, maxX = 0, 0
	}
	shift := margin - minX
	p := placed{Pos: map[string]point{}, Layer: map[string]int{}, Routes: make([][]point, len(edges)),
		W: maxX - minX + 2*margin, H: y - layerGap + margin}
	for c, cl := range cells {
		if cl.node >= 0 {
			p.Pos[nodes[cl.node].ID] = point{cl.x + shift, layerY[cellLayer[c]]}
			p.Layer[nodes[cl.node].ID] = cellLayer[c]
		}
	}
	for ei, chain := range chains {
		if len(chain) == 0 {
			continue
		}
		var pts []point
		for i, c := range chain {
			cx, cy := cells[c].x+shift, layerY[cellLayer[c]]
			switch {
			case i == 0 && len(chain) > 1 && cellLayer[chain[1]] > cellLayer[c]:
				pts = append(pts, point{cx, cy + cells[c].h/2}) // leaves from the bottom
			case i == 0 && len(chain) > 1 && cellLayer[chain[1]] < cellLayer[c]:
				pts = append(pts, point{cx, cy - cells[c].h/2})
			case i == len(chain)-1 && cellLayer[chain[i-1]] < cellLayer[c]:
				pts = append(pts, point{cx, cy - cells[c].h/2}) // arrives at the top
			case i == len(chain)-1 && cellLayer[chain[i-1]] > cellLayer[c]:
				pts = append(pts, point{cx, cy + cells[c].h/2})
			default:
				pts = append(pts, point{cx, cy})
			}
		}
		p.Routes[ei] = pts
	}
	return p
}
