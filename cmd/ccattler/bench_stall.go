package main

import (
	"context"
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
// --stall, the bench says what is left and who is holding it: the
// instances of each service by where they stand, and what a fresh
// evaluation of the rules would still do on the live facts. A firing there that the running engine does not make points
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
	// The keys the listed fresh firings read and write, the mirror's copy
	// against etcd's: a key the mirror lacks, or holds at another
	// revision, is a watch event it missed (the comparison by prefix
	// covers only the few a removal writes).
	FreshKeys     int      `json:"fresh_keys"`
	FreshKeyDrift []string `json:"fresh_key_drift,omitempty"`
	// The same keys as the mirror holds them, each with its revision: with
	// `--log-level debug`, whose "round planned" lines give each round's
	// revision, they name the round that saw a missed firing's last change.
	FreshKeyFacts []string `json:"fresh_key_facts,omitempty"`
	// The mirror against etcd, under the prefixes a scale or a stop
	// writes: a mirror that missed writes stalls the engine and the
	// tracker alike, and its fresh round fires nothing.
	MirrorRev     int64         `json:"mirror_revision"`
	EtcdRev       int64         `json:"etcd_revision"`
	Drift         []prefixDrift `json:"mirror_drift,omitempty"`
	MirrorEvents  int64         `json:"mirror_events"`  // watch events the mirror applied in the run
	MirrorRelists int64         `json:"mirror_relists"` // its full lists, the first one included
	// A new watch from the mirror's revision on, for a few seconds: events
	// it delivers that the mirror has not point at the mirror's own watch.
	ProbeEvents int    `json:"probe_events"`
	ProbeFirst  string `json:"probe_first,omitempty"` // the first one's key and revision
}

// prefixDrift is how the mirror differs from etcd under one prefix.
type prefixDrift struct {
	Prefix   string   `json:"prefix"`
	Differ   int      `json:"differ"`   // keys missing, extra or with another value in the mirror
	Examples []string `json:"examples"` // a few of them
}

// driftPrefixes are the prefixes stalled compares, the few a removal is
// made of.
var driftPrefixes = []string{"desired/service/", "intent/", "effective/", "placement/"}

// drift compares the mirror with etcd under driftPrefixes, and probes
// etcd with a watch of its own from the mirror's revision on.
func (b *bench) drift(ctx context.Context, r *stallReport) error {
	r.MirrorRev = b.mirror.Rev()
	st, _ := b.mirror.Stats()
	r.MirrorEvents, r.MirrorRelists = st.Events, st.Relists
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	for resp := range b.store.Watch(pctx, "", r.MirrorRev+1) {
		if r.ProbeFirst == "" && len(resp.Events) > 0 {
			ev := resp.Events[0]
			r.ProbeFirst = fmt.Sprintf("%s at revision %d", b.store.Rel(string(ev.Kv.Key)), ev.Kv.ModRevision)
		}
		r.ProbeEvents += len(resp.Events)
	}
	cancel()
	for _, p := range driftPrefixes {
		fs, rev, err := b.store.List(ctx, p, 0)
		if err != nil {
			return fmt.Errorf("list %s: %w", p, err)
		}
		r.EtcdRev = max(r.EtcdRev, rev)
		d := prefixDrift{Prefix: p}
		note := func(format string, args ...any) {
			if d.Differ++; len(d.Examples) < 5 {
				d.Examples = append(d.Examples, fmt.Sprintf(format, args...))
			}
		}
		b.mirror.View(func(rd facts.Reader) {
			in := make(map[string]bool, len(fs))
			for _, f := range fs {
				in[f.Key] = true
				switch m, ok := rd.Get(f.Key); {
				case !ok:
					note("%s: etcd %s (revision %d), not in the mirror", f.Key, f.Value, f.ModRevision)
				case string(m.Value) != string(f.Value):
					note("%s: etcd %s (revision %d), mirror %s (revision %d)", f.Key, f.Value, f.ModRevision, m.Value, m.ModRevision)
				}
			}
			rd.Prefix(p, func(m facts.Fact) bool {
				if !in[m.Key] {
					note("%s: not in etcd, mirror %s (revision %d)", m.Key, m.Value, m.ModRevision)
				}
				return true
			})
		})
		if d.Differ > 0 {
			r.Drift = append(r.Drift, d)
		}
	}
	return nil
}

// stalled builds the report: the tally of every service, and the fresh
// round over a copy of the mirror (copied first, so that the engine is not
// held while the round runs).
func (b *bench) stalled(ctx context.Context) (*stallReport, error) {
	r := &stallReport{Services: map[string]serviceTally{}}
	if err := b.drift(ctx, r); err != nil {
		return r, err
	}
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
	snapshot, r.FreshRev = mirrorFacts(b.mirror)
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
	return r, b.freshKeys(ctx, r, tb, p.Firings)
}

// freshKeys compares, for the first firings of each rule (those the report
// lists), every key they read or write in the snapshot tb with etcd.
func (b *bench) freshKeys(ctx context.Context, r *stallReport, tb *facts.Table, fs []eval.Firing) error {
	const maxKeys = 200
	listed := map[string]int{}
	seen := map[string]bool{}
	var keys []string
	for _, f := range fs {
		if (f.Kind == "derive" && len(f.Writes) == 0) || listed[f.Rule] >= 5 {
			continue
		}
		listed[f.Rule]++
		for _, rd := range f.Reads {
			if !rd.Prefix && !seen[rd.Key] && len(keys) < maxKeys {
				seen[rd.Key] = true
				keys = append(keys, rd.Key)
			}
		}
		for _, w := range f.Writes {
			if !seen[w.Key] && len(keys) < maxKeys {
				seen[w.Key] = true
				keys = append(keys, w.Key)
			}
		}
	}
	for _, k := range keys {
		e, inEtcd, err := b.store.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("get %s: %w", k, err)
		}
		r.FreshKeys++
		m, inMirror := tb.Get(k)
		if inMirror {
			r.FreshKeyFacts = append(r.FreshKeyFacts, fmt.Sprintf("%s = %s (revision %d)", k, m.Value, m.ModRevision))
		} else {
			r.FreshKeyFacts = append(r.FreshKeyFacts, k+" absent")
		}
		switch {
		case !inEtcd && !inMirror:
		case !inMirror:
			r.FreshKeyDrift = append(r.FreshKeyDrift, fmt.Sprintf("%s: etcd %s (revision %d), not in the mirror", k, e.Value, e.ModRevision))
		case !inEtcd:
			r.FreshKeyDrift = append(r.FreshKeyDrift, fmt.Sprintf("%s: not in etcd, mirror %s (revision %d)", k, m.Value, m.ModRevision))
		case string(m.Value) != string(e.Value) || m.ModRevision != e.ModRevision:
			r.FreshKeyDrift = append(r.FreshKeyDrift, fmt.Sprintf("%s: etcd %s (revision %d), mirror %s (revision %d)", k, e.Value, e.ModRevision, m.Value, m.ModRevision))
		}
	}
	return nil
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
		fmt.Fprintf(w, "a fresh evaluation of the rules on the mirror's facts at revision %d (%.1f s) fires nothing: the engine is not behind them\n", r.FreshRev, r.FreshSeconds)
	} else {
		fmt.Fprintf(w, "a fresh evaluation of the rules on the mirror's facts at revision %d (%.1f s) would fire:\n", r.FreshRev, r.FreshSeconds)
		for _, rule := range slices.Sorted(maps.Keys(r.FreshFirings)) {
			fmt.Fprintf(w, "  %s ×%d: %s\n", rule, r.FreshFirings[rule], strings.Join(r.FreshBindings[rule], "; "))
		}
	}
	for _, p := range r.FreshProblems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	if r.FreshKeys > 0 {
		if len(r.FreshKeyDrift) == 0 {
			fmt.Fprintf(w, "the %d keys those firings read and write are the same in the mirror and in etcd\n", r.FreshKeys)
		} else {
			fmt.Fprintf(w, "of the %d keys those firings read and write, %d differ between the mirror and etcd:\n", r.FreshKeys, len(r.FreshKeyDrift))
			printFirst(w, r.FreshKeyDrift)
		}
	}
	if len(r.FreshKeyFacts) > 0 {
		fmt.Fprintln(w, "in the mirror, with their revisions (--log-level debug logs each round's):")
		printFirst(w, r.FreshKeyFacts)
	}
	fmt.Fprintf(w, "the mirror applied %d watch events and listed everything %d times; a new watch from its revision on delivered %d events in 3 s",
		r.MirrorEvents, r.MirrorRelists, r.ProbeEvents)
	if r.ProbeFirst != "" {
		fmt.Fprintf(w, ", the first %s", r.ProbeFirst)
	}
	fmt.Fprintln(w)
	if len(r.Drift) == 0 {
		fmt.Fprintf(w, "the mirror (revision %d) holds what etcd (revision %d) holds under %s\n", r.MirrorRev, r.EtcdRev, strings.Join(driftPrefixes, ", "))
		return
	}
	fmt.Fprintf(w, "the mirror (revision %d) differs from etcd (revision %d):\n", r.MirrorRev, r.EtcdRev)
	for _, d := range r.Drift {
		fmt.Fprintf(w, "  %s: %d keys, e.g.\n", d.Prefix, d.Differ)
		for _, e := range d.Examples {
			fmt.Fprintf(w, "    %s\n", e)
		}
	}
}

// printFirst prints the first 10 lines, indented, and an ellipsis when
// there are more.
func printFirst(w io.Writer, lines []string) {
	for i, l := range lines {
		if i == 10 {
			fmt.Fprintln(w, "    …")
			return
		}
		fmt.Fprintf(w, "    %s\n", l)
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := b.stalled(ctx)
	b.res.Stall = r
	b.pr.mu.Lock()
	defer b.pr.mu.Unlock()
	fmt.Fprintf(b.pr.w, "\n%s: %s; ", what, why)
	r.print(b.pr.w, want)
	if err != nil {
		fmt.Fprintf(b.pr.w, "  (report cut short: %v)\n", err)
	}
}
