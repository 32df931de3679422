package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/audit"
	"github.com/ccattler/ccattler/facts"
)

// liveLog prints, from revision rev on, what happens in the store as one
// line per actor and revision: a rule firing (from its record), an apply,
// an agent's report. It is the live log of `ccattler dev`.
func liveLog(ctx context.Context, s *facts.Store, rev int64, out io.Writer, leases bool) error {
	wc := s.WatchChanges(ctx, "", rev+1)
	for resp := range wc {
		if err := resp.Err; err != nil {
			return err
		}
		// One watch response may hold several revisions; a record explains
		// the other writes of its own revision.
		byRev := map[int64][]facts.Change{}
		var revs []int64
		for _, c := range resp.Changes {
			r := c.ModRevision
			if _, ok := byRev[r]; !ok {
				revs = append(revs, r)
			}
			byRev[r] = append(byRev[r], c)
		}
		for _, r := range revs {
			for _, line := range describeRevision(s, byRev[r], leases) {
				fmt.Fprintln(out, line)
			}
		}
	}
	return ctx.Err()
}

// describeRevision renders the writes of one revision.
func describeRevision(s *facts.Store, evs []facts.Change, leases bool) []string {
	var lines []string
	var loose []facts.Change // writes no record explains
	recorded := false
	for _, ev := range evs {
		key := ev.Key
		if !facts.IsRecord(key) {
			continue
		}
		if ev.Deleted || ev.CreateRevision != ev.ModRevision {
			continue // retention deletes records
		}
		recorded = true
		var rec facts.EventRecord
		if json.Unmarshal(ev.Value, &rec) != nil {
			continue
		}
		lines = append(lines, describeRecord(rec))
	}
	if recorded {
		return lines
	}
	for _, ev := range evs {
		key := ev.Key
		// The clock ticks every second and the schema is written once: noise here.
		if strings.HasPrefix(key, "schema/") || key == facts.Clock() || (!leases && strings.HasPrefix(key, "lease/")) {
			continue
		}
		loose = append(loose, ev)
	}
	if len(loose) == 0 {
		return nil
	}
	// Writes without a record come from agents (observed/, lease/) or from
	// other writers; group an agent's report by instance or node.
	groups := map[string][]string{}
	var names []string
	for _, ev := range loose {
		key := ev.Key
		who, what := "write", key
		if k, err := s.Schema.Parse(key); err == nil {
			switch {
			case k.Var("instance-id") != "" && strings.HasPrefix(key, "observed/"):
				who, what = "instance "+k.Var("instance-id"), instanceAttr(key, k.Var("instance-id"))
			case k.Var("node-id") != "":
				who, what = k.Var("node-id"), strings.TrimPrefix(key, "observed/node/"+k.Var("node-id")+"/")
				if strings.HasPrefix(key, "lease/") {
					what = "lease"
				}
			}
		}
		if ev.Deleted {
			what += " deleted"
		} else {
			what += "=" + strings.Trim(string(ev.Value), `"`)
		}
		if _, ok := groups[who]; !ok {
			names = append(names, who)
		}
		groups[who] = append(groups[who], what)
	}
	sort.Strings(names)
	now := stamp(time.Now())
	for _, n := range names {
		parts := groups[n]
		sort.Strings(parts)
		lines = append(lines, fmt.Sprintf("%s  %-18s %s %s", now, "report", n, strings.Join(parts, " ")))
	}
	return lines
}

// instanceAttr names an observed fact of instance id in its report line:
// the attribute under observed/instance/ID/ (state, health), otherwise the
// key without "observed/" and the id (service/web/metrics/cpu).
func instanceAttr(key, id string) string {
	if attr, ok := strings.CutPrefix(key, facts.Instance(id)+"/"); ok {
		return attr
	}
	return strings.TrimPrefix(strings.TrimSuffix(key, "/"+id), "observed/")
}

// describeRecord renders one record: time, rule, and what it wrote.
func describeRecord(rec facts.EventRecord) string {
	at, err := time.Parse(time.RFC3339Nano, rec.Time)
	if err != nil {
		at = time.Now()
	}
	var parts []string
	for _, w := range rec.Writes {
		if w.Deleted {
			parts = append(parts, "- "+w.Key)
		} else {
			parts = append(parts, w.Key+" = "+string(w.Value))
		}
	}
	what := strings.Join(parts, ", ")
	if rec.Message != "" {
		what = strings.TrimSpace(rec.Message + "  " + what)
	}
	if len(rec.Rejected) > 0 {
		var cands []string
		for _, r := range rec.Rejected {
			cands = append(cands, fmt.Sprintf("%s: %s", candidateOf(r.Candidate), strings.Join(r.Filters, ",")))
		}
		what = fmt.Sprintf("no candidate for %s (%s)", bindingOf(rec.Bindings), strings.Join(cands, "; "))
	}
	return fmt.Sprintf("%s  %-18s %s", stamp(at.Local()), rec.Rule, what)
}

func candidateOf(c map[string]string) string {
	var parts []string
	for _, v := range c {
		parts = append(parts, v)
	}
	sort.Strings(parts)
	return strings.Join(parts, "/")
}

func bindingOf(b map[string]string) string {
	if id, ok := b["id"]; ok {
		return id
	}
	return audit.BindingText(b)
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }
