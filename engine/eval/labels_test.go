package eval

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/rules"
)

// goroutineLabels returns the goroutine profile's label lines.
func goroutineLabels(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.HasPrefix(l, "# labels:") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestProfileLabelsTagTheGoroutine: what a CPU profile's -tags shows is
// the label the evaluating goroutine carries: the rule, then the phase,
// then nothing once the round is done.
func TestProfileLabelsTagTheGoroutine(t *testing.T) {
	var l profileLabels
	defer l.clear()
	l.rule(&rules.Rule{Name: "schedule"})
	if got := goroutineLabels(t); !strings.Contains(got, `"rule":"schedule"`) {
		t.Fatalf("labels %q, want rule schedule", got)
	}
	l.phase("keep")
	got := goroutineLabels(t)
	if !strings.Contains(got, `"phase":"keep"`) || strings.Contains(got, `"rule":"schedule"`) {
		t.Fatalf("labels %q, want phase keep alone", got)
	}
	l.clear()
	if got := goroutineLabels(t); strings.Contains(got, `"phase":"keep"`) {
		t.Fatalf("labels %q after clear, want none of ours", got)
	}
}
