package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// KindRejection is the Kind of a record that explains a choice that placed
// nothing (`ccattler why-not` reads them).
const KindRejection = "rejection"

// maxRejectionMemory bounds how many unplaced bindings the engine remembers
// to avoid writing the same rejection record every round.
const maxRejectionMemory = 100000

// recordRejections writes, for every choice in the plan that placed nothing
// (no firing of its rule under its binding), one record with every
// candidate and the filters it failed. A record is written only when it
// differs from the last one this term wrote for that binding, so an
// instance that cannot be placed does not add a record every round.
// Rejection records explain and change nothing: a failure to write them is
// logged, and only the loss of leadership stops the term.
func (e *Engine) recordRejections(ctx context.Context, t *term, p eval.Plan, last map[string]string) error {
	if len(p.Rejections) == 0 {
		return nil
	}
	type group struct {
		rule     string
		bindings map[string]string
		rejected []facts.EventRejection
	}
	groups := map[string]*group{}
	var order []string
	for _, r := range p.Rejections {
		k := r.Rule + "\x00" + bindingKey(r.Bindings)
		g := groups[k]
		if g == nil {
			g = &group{rule: r.Rule, bindings: r.Bindings}
			groups[k] = g
			order = append(order, k)
		}
		g.rejected = append(g.rejected, facts.EventRejection{Candidate: r.Candidate, Filters: r.Filters})
	}
	for _, f := range p.Firings {
		for k, g := range groups {
			if g.rule == f.Rule && contains(f.Bindings, g.bindings) {
				delete(groups, k) // the choice placed it
				delete(last, k)
			}
		}
	}
	if len(last) > maxRejectionMemory {
		clear(last)
	}
	var ops []facts.Op
	sigs := map[string]string{}
	for _, k := range order {
		g, ok := groups[k]
		if !ok {
			continue
		}
		sort.Slice(g.rejected, func(i, j int) bool {
			return bindingKey(g.rejected[i].Candidate) < bindingKey(g.rejected[j].Candidate)
		})
		sig, _ := json.Marshal(g.rejected)
		if last[k] == string(sig) {
			continue
		}
		id, at := e.ids.Next()
		rec, err := json.Marshal(facts.EventRecord{Rule: g.rule, Version: p.RuleSetVersion, Kind: KindRejection,
			Bindings: g.bindings, Rejected: g.rejected, Time: at.Format(timeLayout), Leader: e.cfg.Identity})
		if err != nil {
			return err
		}
		ops = append(ops, facts.Put(facts.Event(id), rec))
		sigs[k] = string(sig)
	}
	if ok, err := e.writeRecords(ctx, t, ops, "rejection records; they are written again when the choice next fails"); err != nil || !ok {
		return err
	}
	for k, s := range sigs {
		last[k] = s
	}
	e.m.update(func(s *Stats) { s.RejectionRecords += int64(len(sigs)) })
	return nil
}

// writeRecords commits records that explain and change nothing, in
// transactions within the operation limit, guarded by the leadership. A
// failure is logged (what names them) and reported as !ok; only the end of
// ctx or the loss of leadership is an error.
func (e *Engine) writeRecords(ctx context.Context, t *term, ops []facts.Op, what string) (bool, error) {
	for len(ops) > 0 {
		n := min(len(ops), e.opsLimit())
		_, err := e.store.Commit(ctx, facts.Txn{Ops: ops[:n], Guard: e.guardsFor(t), Checked: true})
		if errors.Is(err, facts.ErrConflict) {
			if lead, lerr := e.stillLeader(ctx, t); lerr == nil && !lead {
				return false, errLostLeadership
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			e.log.Warn("engine: writing "+what+" failed", "err", err, "records", len(ops))
			return false, nil
		}
		ops = ops[n:]
	}
	return true, nil
}

// bindingKey renders a binding in a stable order.
func bindingKey(b map[string]string) string {
	names := make([]string, 0, len(b))
	for n := range b {
		names = append(names, n)
	}
	sort.Strings(names)
	var s strings.Builder
	for _, n := range names {
		s.WriteString(n + "=" + b[n] + "\x00")
	}
	return s.String()
}

// contains reports whether every variable of sub has the same value in b.
func contains(b, sub map[string]string) bool {
	for k, v := range sub {
		if b[k] != v {
			return false
		}
	}
	return true
}
