package engine

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
)

// The changes a round is handed are the difference between the view the
// evaluator saw last and this one, laid writes included on both sides: a
// laid write come back is not handed again, one that never committed is
// handed back as the mirror's value, the Prev of each is what the previous
// view held.
func TestLogicalChangesAreTheViewsDifference(t *testing.T) {
	k := func(s string) string { return facts.EffectiveInstances(s) }
	tb := facts.NewTable(nil)
	tb.Put(facts.Fact{Key: k("came-back"), Value: []byte("1"), ModRevision: 10, CreateRevision: 10})
	tb.Put(facts.Fact{Key: k("lost-delete"), Value: []byte("7"), ModRevision: 3, CreateRevision: 3})
	tb.Put(facts.Fact{Key: k("other"), Value: []byte("4"), ModRevision: 11, CreateRevision: 2})
	tb.Put(facts.Fact{Key: k("extra"), Value: []byte("5"), ModRevision: 4, CreateRevision: 4})
	// laid now: k("laid-now") = 9 over the mirror's 8, which the table holds under it
	tb.SetRev(12)
	l := &leader{
		laid: []facts.Laid{
			{Overlay: facts.Overlay{Key: k("came-back"), Value: []byte("1")}},
			{Overlay: facts.Overlay{Key: k("lost-delete")}, Under: facts.Fact{Key: k("lost-delete"), Value: []byte("7")}, UnderOK: true},
			{Overlay: facts.Overlay{Key: k("lost-put"), Value: []byte("6")}},
		},
		extra: map[string]bool{k("extra"): true},
	}
	mirror := []facts.Change{
		{Fact: facts.Fact{Key: k("came-back"), Value: []byte("1"), ModRevision: 10, CreateRevision: 10}, PrevKnown: true},
		{Fact: facts.Fact{Key: k("other"), Value: []byte("4"), ModRevision: 11, CreateRevision: 2}, Prev: []byte("3"), PrevKnown: true},
	}
	now := []facts.Laid{{Overlay: facts.Overlay{Key: k("laid-now"), Value: []byte("9")},
		Under: facts.Fact{Key: k("laid-now"), Value: []byte("8")}, UnderOK: true}}
	var got []string
	for _, c := range l.logical(tb, mirror, now) {
		prev := "absent"
		if c.Prev != nil {
			prev = string(c.Prev)
		}
		val := string(c.Value)
		if c.Deleted {
			val = "deleted"
		}
		got = append(got, fmt.Sprintf("%s %s->%s known=%v", strings.TrimPrefix(c.Key, "effective/service/"), prev, val, c.PrevKnown))
	}
	sort.Strings(got)
	want := []string{
		"extra/instances 5->5 known=true",            // to evaluate again, as it stands
		"laid-now/instances 8->9 known=true",         // laid over the mirror's 8
		"lost-delete/instances absent->7 known=true", // the delete did not commit: back
		"lost-put/instances 6->deleted known=true",   // the put did not commit: gone
		"other/instances 3->4 known=true",            // someone else's change
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
