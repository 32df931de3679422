package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// When a phase is not done within --timeout, or makes no progress for
// --stall, the bench says what is left
// and who is holding it: the instances of each service by where they
// stand, and what a fresh evaluation of the rules would still do on the
// live facts. A firing there that the running engine does not make points
// at the engine's incremental state (a kept result or a change it did not
// follow); none points at the facts themselves: an agent that does not
// report, or a condition the rules wait on.

// serviceTally is where one service's instances stand, as the tracker saw.
type serviceTally struct {
	Placed        int `json:"placed"`         // with a placement
	PlacedReady   int `json:"placed_ready"`   // placed, running and healthy
	PlacedPending int `json:"placed_pending"` // placed, not yet running
	Waiting       int `json:"waiting"`        // pending without a placement
	Stopping      int `json:"stopping"`       // running without a placement
	Stopped       int `json:"stopped"`
}

// stallReport is what the bench prints and records when a phase stalls.
type stallReport struct {
	Services map[string]serviceTally `json:"services"`
	// One full round of a fresh evaluator on a copy of the live facts:
	// firings by rule, with a few of each rule's bindings.
	FreshRev      int64               `json:"fresh_revision"`
	FreshFirings  map[string]int      `json:"fresh_firings"`
	FreshBindings map[string][]string `json:"fresh_bindings,omitempty"`
	FreshSeconds  float64             `json:"fresh_seconds"`
	FreshProblems []string            `json:"fresh_problems,omitempty"`
}

// stalled builds the report: the tally of every service, and the fresh
// round over a copy of the mirror (copied first, so that the engine is not
// held while the round runs).
func (b *bench) stalled() (*stallReport, error) {
	r := &stallReport{Services: map[string]serviceTally{}}
	b.tr.read(func(t *tracker) {
		for _, in := range t.inst {
			if in.service == "" {
				continue
			}
			s := r.Services[in.service]
			switch {
			case in.node != "" && in.ready():
				s.Placed++
				s.PlacedReady++
			case in.node != "":
				s.Placed++
				s.PlacedPending++
			case in.state == "pending":
				s.Waiting++
			case in.state == "running":
				s.Stopping++
			case in.state == "stopped":
				s.Stopped++
			}
			r.Services[in.service] = s
		}
	})
	var snapshot []facts.Fact
	b.mirror.View(func(rd facts.Reader) {
		r.FreshRev = rd.Rev()
		snapshot = make([]facts.Fact, 0, rd.Len())
		rd.Prefix("", func(f facts.Fact) bool { snapshot = append(snapshot, f); return true })
	})
	rs, _, diags := loadPolicies("", planSchema(snapshot))
	if diags.HasErrors() {
		return r, fmt.Errorf("load the policies: %s", diags.Error())
	}
	tb := facts.NewTable(rs.Schema)
	for _, f := range snapshot {
		tb.Put(f)
	}
	tb.SetRev(r.FreshRev)
	start := time.Now()
	p := eval.New(rs).Full(tb)
	r.FreshSeconds = time.Since(start).Seconds()
	r.FreshFirings = map[string]int{}
	r.FreshBindings = map[string][]string{}
	for _, f := range p.Firings {
		if f.Kind == "derive" && len(f.Writes) == 0 {
			continue
		}
		r.FreshFirings[f.Rule]++
		if bs := r.FreshBindings[f.Rule]; len(bs) < 5 {
			r.FreshBindings[f.Rule] = append(bs, bindingString(f.Bindings))
		}
	}
	for _, pr := range p.Problems {
		r.FreshProblems = append(r.FreshProblems, pr.Error())
	}
	return r, nil
}

// bindingString names a firing by the variables that say what it is
// about ("svc=web id=a1 node=n2"), or, when it has none of them, by all
// its bindings in key order, cut at 120 bytes.
func bindingString(b map[string]string) string {
	var sb strings.Builder
	for _, k := range []string{"svc", "service", "id", "node", "volume"} {
		if v, ok := b[k]; ok {
			if sb.Len() > 0 {
				sb.WriteByte(' ')
			}
			fmt.Fprintf(&sb, "%s=%s", k, v)
		}
	}
	if sb.Len() > 0 {
		return sb.String()
	}
	for i, k := range slices.Sorted(maps.Keys(b)) {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%s=%s", k, b[k])
	}
	if s := sb.String(); len(s) > 120 {
		return s[:120] + "…"
	}
	return sb.String()
}

// print writes the report for a reader: the first 20 services not done
// (each running want, or with want < 0 every placed one running, and
// none waiting or stopping), then the fresh round.
func (r *stallReport) print(w io.Writer, want int) {
	fmt.Fprintln(w, "what is left:")
	shown := 0
	for _, name := range slices.Sorted(maps.Keys(r.Services)) {
		s := r.Services[name]
		if s.PlacedReady == s.Placed && (want < 0 || s.Placed == want) && s.Waiting == 0 && s.Stopping == 0 {
			continue
		}
		if shown++; shown > 20 {
			fmt.Fprintln(w, "  …")
			break
		}
		fmt.Fprintf(w, "  %s: %d placed (%d running and healthy, %d not yet), %d waiting for a placement, %d stopping, %d stopped\n",
			name, s.Placed, s.PlacedReady, s.PlacedPending, s.Waiting, s.Stopping, s.Stopped)
	}
	if len(r.FreshFirings) == 0 {
		fmt.Fprintf(w, "a fresh evaluation of the rules at revision %d (%.1f s) fires nothing: the engine is not behind; what is left waits on the facts\n", r.FreshRev, r.FreshSeconds)
	} else {
		fmt.Fprintf(w, "a fresh evaluation of the rules at revision %d (%.1f s) would fire:\n", r.FreshRev, r.FreshSeconds)
		for _, rule := range slices.Sorted(maps.Keys(r.FreshFirings)) {
			fmt.Fprintf(w, "  %s ×%d: %s\n", rule, r.FreshFirings[rule], strings.Join(r.FreshBindings[rule], "; "))
		}
	}
	for _, p := range r.FreshProblems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
}

// reportStall records and prints where the phase what stood when it was
// stopped, and why.
func (b *bench) reportStall(what, why string) {
	want := -1
	switch what {
	case "scale-down":
		want = b.f.scaleTo
	case "delete":
		want = 0
	}
	r, err := b.stalled()
	b.res.Stall = r
	b.pr.mu.Lock()
	defer b.pr.mu.Unlock()
	fmt.Fprintf(b.pr.w, "\n%s: %s; ", what, why)
	r.print(b.pr.w, want)
	if err != nil {
		fmt.Fprintf(b.pr.w, "  (no fresh evaluation: %v)\n", err)
	}
}
