package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/ccattler/ccattler/facts"
)

// KindRejection marks a record of a choice that found no candidate.
const KindRejection = "rejection"

// WhyNot returns the newest rejection record whose bindings bind variable
// to value (e.g. id=a8f31), or ok=false when there is none. It reads the
// records newest first and stops at that one; a record whose bytes do not
// name the value is not decoded.
func WhyNot(ctx context.Context, s *facts.Store, variable, value string) (Event, bool, error) {
	var found Event
	ok := false
	var q Query
	if quoted, _ := json.Marshal(value); string(quoted) == `"`+value+`"` {
		q.Raw = Mentions(string(quoted)) // stored as it is: a record binding it contains it
	}
	_, _, _, err := Newest(ctx, s, q, func(e Event) bool {
		if e.Kind == KindRejection && e.Bindings[variable] == value {
			found, ok = e, true
			return false
		}
		return true
	})
	return found, ok, err
}

// PrintRejection writes one line per candidate with every filter it failed.
func PrintRejection(out io.Writer, e Event) {
	fmt.Fprintf(out, "rule %s found no candidate for %s (event %s, rules %s):\n", e.Rule, BindingText(e.Bindings), e.ID, e.Version)
	rs := append([]facts.EventRejection(nil), e.Rejected...)
	sort.Slice(rs, func(i, j int) bool { return BindingText(rs[i].Candidate) < BindingText(rs[j].Candidate) })
	for _, r := range rs {
		fmt.Fprintf(out, "  %-24s rejected by %s\n", candidateText(r.Candidate), strings.Join(r.Filters, ", "))
	}
	if len(rs) == 0 {
		fmt.Fprintln(out, "  (there were no candidates at all)")
	}
}

func candidateText(c map[string]string) string {
	if len(c) == 1 {
		for _, v := range c {
			return v
		}
	}
	return BindingText(c)
}
