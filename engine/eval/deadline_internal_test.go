package eval

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ccattler/ccattler/policies"
	"github.com/ccattler/ccattler/rules"
)

// TestDeadlineAliasDecidesWhichRulesWait: a rule's bindings get deadlines
// only when its condition can turn from false to true alone as the clock
// moves on, and nothing else it computes or writes reads the clock.
func TestDeadlineAliasDecidesWhichRulesWait(t *testing.T) {
	cases := []struct {
		when, value string
		waits       bool
	}{
		{"clock - stopped > duration('1h')", "'gone'", true},
		{"clock - stopped >= duration('1h') && state == 'failed'", "'gone'", true},
		{"state == 'failed' || clock - stopped > duration('1h')", "'gone'", true},
		{"duration('1h') < clock - stopped", "'gone'", true},
		{"stopped + duration('1h') < clock", "'gone'", true},
		{"(clock - stopped).getMilliseconds() >= 3 * 1000", "'gone'", true},
		{"(int(clock) - int(stopped)) * 1000 >= 5000", "'gone'", true},
		{"state == 'failed' ? clock - stopped > duration('1m') : clock - stopped > duration('1h')", "'gone'", true},
		{"!(state == 'failed') && clock > stopped", "'gone'", true},
		// Turns false as the clock moves, or either way.
		{"clock - stopped < duration('1h')", "'gone'", false},
		{"!(clock - stopped > duration('1h'))", "'gone'", false},
		{"clock - stopped == duration('1h')", "'gone'", false},
		{"(int(clock) - int(stopped)) * -1 >= 5", "'gone'", false},
		{"clock - clock > duration('1h')", "'gone'", false},
		{"clock - stopped > duration('1h') ? true : false", "'gone'", false},
		// A timestamp's milliseconds are the time of day's: they wrap.
		{"(clock - duration('1h')).getMilliseconds() > 500", "'gone'", false},
		// What it writes would follow the clock.
		{"clock - stopped > duration('1h')", "string(clock)", false},
		// It does not read the clock at all.
		{"state == 'failed'", "'gone'", false},
	}
	for _, c := range cases {
		src := fmt.Sprintf(`rule "r" {
  doc       = "test"
  principal = "gc"
  match {
    state   = "observed/instance/{id}/state"
    stopped = "observed/instance/{id}/stopped_at"
    clock   = "observed/clock"
  }
  when = %q
  emit "observed/instance/{id}/reason" { value = %q }
}
`, c.when, c.value)
		rs, diags := rules.LoadFiles(map[string][]byte{"r.hcl": []byte(src)})
		if diags.HasErrors() {
			t.Fatalf("%s: %s", c.when, diags.Error())
		}
		_, got := deadlineAlias(rs.Rules[0])
		if got != c.waits {
			t.Errorf("when = %q, value = %q: waits for its deadline %v, want %v", c.when, c.value, got, c.waits)
		}
	}
}

// TestDefaultRulesThatWait names the built-in rules whose bindings a clock
// move evaluates only when due: a policy edit that makes one read the
// clock another way shows here.
func TestDefaultRulesThatWait(t *testing.T) {
	rs, diags := rules.LoadFiles(policies.Sources())
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var got []string
	for _, r := range rs.Rules {
		if _, ok := deadlineAlias(r); ok {
			got = append(got, r.Name)
		}
	}
	slices.Sort(got)
	want := []string{"autoscale_forget", "collect_stopped", "node_unreachable", "release_failed", "retire_unhealthy"}
	if !slices.Equal(got, want) {
		t.Fatalf("rules with deadlines: %v, want %v", got, want)
	}
}
