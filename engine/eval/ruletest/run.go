package ruletest

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

// MaxRounds bounds the rounds of one step's run to a fixpoint.
const MaxRounds = 100

// Result is the outcome of one test.
type Result struct {
	Test     *Test
	Failures []string       // one readable expected/actual diff per failing step; none: passed
	Firings  map[string]int // rule -> firings over all steps
	Rounds   int
}

// Passed reports whether every step met its expectations.
func (r Result) Passed() bool { return len(r.Failures) == 0 }

// Run runs a test: each step's facts are applied to a facts.Table, the rule
// set runs to a fixpoint (the first step with a full evaluation, later ones
// incrementally from the changes), each plan's writes are applied, and the
// net change is compared with the step's expect block.
func Run(rs *rules.RuleSet, t *Test) Result {
	res := Result{Test: t, Firings: map[string]int{}}
	if !t.Summaries {
		rs = rs.WithoutSummaries()
	}
	tb := facts.NewTable(rs.Schema)
	now := t.Now // a step's now holds from that step on
	ev := eval.New(rs, eval.WithSeed(t.Seed), eval.WithClock(func() time.Time { return now }))
	var rev int64
	apply := func(key string, value []byte, lease int64) facts.Change {
		rev++
		tb.SetRev(rev)
		if value == nil {
			old, _ := tb.Delete(key)
			old.ModRevision = rev
			return facts.Change{Fact: old, Deleted: true}
		}
		cr := rev
		if old, ok := tb.Get(key); ok {
			cr = old.CreateRevision
		}
		f := facts.Fact{Key: key, Value: value, ModRevision: rev, CreateRevision: cr, Lease: lease}
		tb.Put(f)
		f, _ = tb.Get(key) // with Invalid
		return facts.Change{Fact: f}
	}
	for i, s := range t.Steps {
		var changes []facts.Change
		for _, f := range s.Puts {
			changes = append(changes, apply(f.Key, f.Value, f.Lease))
		}
		for _, k := range s.Dels {
			if _, ok := tb.Get(k); ok {
				changes = append(changes, apply(k, nil, 0))
			}
		}
		before := snapshot(tb)
		firings := map[string]int{}
		rounds := map[string]int{} // rule -> rounds it fired in
		problems := map[string][]string{}
		rejections := map[string]bool{}
		ticked := false
		if !s.Now.IsZero() && !s.Now.Equal(now) {
			now, ticked = s.Now, true
		}
		fixed := true
		settle := func(plan eval.Plan) {
			for round := 0; round < MaxRounds; round++ {
				res.Rounds++
				for _, p := range plan.Problems {
					problems[p.Rule] = append(problems[p.Rule], p.Err.Error())
				}
				for _, r := range plan.Rejections {
					rejections[renderRejection(r)] = true
				}
				if len(plan.Firings) == 0 {
					return
				}
				var changes []facts.Change
				fired := map[string]bool{}
				for _, f := range plan.Firings {
					if !fired[f.Rule] {
						fired[f.Rule] = true
						rounds[f.Rule]++
					}
					firings[f.Rule]++
					res.Firings[f.Rule]++
					for _, w := range f.Writes {
						if w.Value == nil {
							if _, ok := tb.Get(w.Key); !ok {
								continue
							}
						}
						changes = append(changes, apply(w.Key, w.Value, 0))
					}
				}
				plan = ev.Incremental(tb, changes)
			}
			fixed = false
		}
		if i == 0 {
			settle(ev.Full(tb))
		} else {
			settle(ev.Incremental(tb, changes))
		}
		if ticked && i > 0 {
			// Time passed: what the engine's tick evaluates (the rules that read now).
			settle(ev.Tick(tb))
		}
		var out []string
		if !fixed {
			out = append(out, fmt.Sprintf("  no fixpoint after %d rounds", MaxRounds))
		}
		if s.Expect != nil {
			out = append(out, compare(s.Expect, before, snapshot(tb), firings, rounds, problems, rejections)...)
		} else if len(problems) > 0 {
			out = append(out, compareProblems(nil, problems)...)
		}
		if len(out) > 0 {
			where := fmt.Sprintf("%s: test %q", s.Range.String(), t.Name)
			if s.Name != "" {
				where += fmt.Sprintf(", then %q", s.Name)
			}
			res.Failures = append(res.Failures, where+"\n"+strings.Join(out, "\n"))
		}
	}
	return res
}

func snapshot(tb *facts.Table) map[string][]byte {
	out := map[string][]byte{}
	for _, k := range tb.Keys() {
		f, _ := tb.Get(k)
		out[k] = f.Value
	}
	return out
}

func renderRejection(r eval.Rejection) string {
	names := make([]string, 0, len(r.Candidate))
	for n := range r.Candidate {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + r.Candidate[n]
	}
	return fmt.Sprintf("%s %s: %s", r.Rule, strings.Join(parts, ","), strings.Join(r.Filters, ", "))
}

// KeyMatch reports whether key matches a pattern whose '*' segments match
// any one segment (a fresh id in an expected key).
func KeyMatch(pattern, key string) bool {
	ps, ks := strings.Split(pattern, "/"), strings.Split(key, "/")
	if len(ps) != len(ks) {
		return false
	}
	for i := range ps {
		if ps[i] != "*" && ps[i] != ks[i] {
			return false
		}
	}
	return true
}

func globMatch(pattern, s string) bool {
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$"
	ok, _ := regexp.MatchString(re, s)
	return ok
}

func compare(e *Expect, before, after map[string][]byte, firings, rounds map[string]int, problems map[string][]string, rejections map[string]bool) []string {
	var out []string
	// Writes: keys that appeared or changed.
	written := map[string][]byte{}
	for k, v := range after {
		if old, ok := before[k]; !ok || !bytes.Equal(old, v) {
			written[k] = v
		}
	}
	var deleted []string
	for k := range before {
		if _, ok := after[k]; !ok {
			deleted = append(deleted, k)
		}
	}
	var diff []string
	// Multisets first: the keys a list pattern matches are its own.
	for _, p := range sortedKeys(e.Multi) {
		var got []string
		for _, k := range sortedKeys(written) {
			if _, exact := e.Writes[k]; !exact && KeyMatch(p, k) {
				got = append(got, string(written[k]))
				delete(written, k)
			}
		}
		var want []string
		for _, w := range e.Multi[p] {
			want = append(want, string(w))
		}
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
			diff = append(diff, fmt.Sprintf("    ~ %s: expected values [%s], got [%s]", p, strings.Join(want, ", "), strings.Join(got, ", ")))
		}
	}
	matched := map[string]bool{}
	for _, k := range sortedKeys(written) {
		pat, ok := "", false
		if _, exact := e.Writes[k]; exact {
			pat, ok = k, true
		} else {
			for _, p := range sortedKeys(e.Writes) {
				if KeyMatch(p, k) {
					pat, ok = p, true
					break
				}
			}
		}
		switch {
		case !ok:
			diff = append(diff, fmt.Sprintf("    + %s = %s   (written, not expected)", k, written[k]))
		case !bytes.Equal(e.Writes[pat], written[k]):
			diff = append(diff, fmt.Sprintf("    ~ %s: expected %s, got %s", k, e.Writes[pat], written[k]))
			matched[pat] = true
		default:
			matched[pat] = true
		}
	}
	for _, p := range sortedKeys(e.Writes) {
		if !matched[p] {
			diff = append(diff, fmt.Sprintf("    - %s = %s   (expected, not written)", p, e.Writes[p]))
		}
	}
	if len(diff) > 0 {
		out = append(out, "  writes:")
		out = append(out, diff...)
	}
	diff = nil
	sort.Strings(deleted)
	dm := map[string]bool{}
	for _, k := range deleted {
		ok := false
		for _, p := range e.Deletes {
			if KeyMatch(p, k) {
				ok, dm[p] = true, true
			}
		}
		if !ok {
			diff = append(diff, fmt.Sprintf("    + %s   (deleted, not expected)", k))
		}
	}
	for _, p := range e.Deletes {
		if !dm[p] {
			diff = append(diff, fmt.Sprintf("    - %s   (expected deleted, still there or never existed)", p))
		}
	}
	if len(diff) > 0 {
		out = append(out, "  deletes:")
		out = append(out, diff...)
	}
	if e.has["firings"] {
		diff = nil
		names := map[string]bool{}
		for n := range firings {
			names[n] = true
		}
		for n := range e.Firings {
			names[n] = true
		}
		for _, n := range sortedKeys(names) {
			if firings[n] != e.Firings[n] {
				diff = append(diff, fmt.Sprintf("    %s: expected %d, got %d", n, e.Firings[n], firings[n]))
			}
		}
		if len(diff) > 0 {
			out = append(out, "  firings:")
			out = append(out, diff...)
		}
	}
	diff = nil
	for _, n := range sortedKeys(e.Rounds) {
		if rounds[n] != e.Rounds[n] {
			diff = append(diff, fmt.Sprintf("    %s: expected to fire in %d round(s), fired in %d", n, e.Rounds[n], rounds[n]))
		}
	}
	if len(diff) > 0 {
		out = append(out, "  rounds:")
		out = append(out, diff...)
	}
	out = append(out, compareProblems(e.Problems, problems)...)
	if e.has["rejections"] {
		diff = nil
		rm := map[string]bool{}
		for _, r := range sortedKeys(rejections) {
			ok := false
			for _, p := range e.Rejections {
				if globMatch(p, r) {
					ok, rm[p] = true, true
				}
			}
			if !ok {
				diff = append(diff, fmt.Sprintf("    + %s   (rejected, not expected)", r))
			}
		}
		for _, p := range e.Rejections {
			if !rm[p] {
				diff = append(diff, fmt.Sprintf("    - %s   (expected rejection, not recorded)", p))
			}
		}
		if len(diff) > 0 {
			out = append(out, "  rejections:")
			out = append(out, diff...)
		}
	}
	return out
}

func compareProblems(want []string, got map[string][]string) []string {
	var diff []string
	wm := map[string]bool{}
	for _, w := range want {
		wm[w] = true
		if _, ok := got[w]; !ok {
			diff = append(diff, fmt.Sprintf("    - %s   (expected a problem, none reported)", w))
		}
	}
	for _, n := range sortedKeys(got) {
		if !wm[n] {
			diff = append(diff, fmt.Sprintf("    + %s: %s   (unexpected)", n, strings.Join(uniqStrings(got[n]), "; ")))
		}
	}
	if len(diff) == 0 {
		return nil
	}
	return append([]string{"  problems:"}, diff...)
}

func uniqStrings(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
