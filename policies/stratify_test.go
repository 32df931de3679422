package policies_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/policies"
	"github.com/ccattler/ccattler/rules"
)

// TestActionMayReadView: replace_first reading the rollout view
// (observed/service/{svc}/rollout, which rollout_status derives from the
// instances replace_first creates) loads: the view depends on the action's
// output, not on its absence. Before, this one optional read gave 49
// "Cycle through negation" errors. A view that tests the absence of an
// instance the cycle writes is refused with one diagnostic, at the read.
func TestActionMayReadView(t *testing.T) {
	files := policies.Sources()
	read := `optional { max_extra = "desired/service/{svc}/update/max_extra" }`
	with := `optional {
    max_extra = "desired/service/{svc}/update/max_extra"
    rollout   = "observed/service/{svc}/rollout"
  }`
	src := string(files["rollout.hcl"])
	if strings.Count(src, read) != 1 {
		t.Fatalf("replace_first's optional block is not %q", read)
	}
	files["rollout.hcl"] = []byte(strings.Replace(src, read, with, 1))
	if _, diags := rules.LoadFiles(files); diags.HasErrors() {
		t.Fatalf("an action reading a view it does not negatively depend on is refused:\n%s", diags.Error())
	}

	// rollout_status testing the absence of what retire_unhealthy writes,
	// which reads the instances replace_first creates, makes the view
	// depend on its own absence through replace_first's read of it.
	view := string(files["rollout.hcl"])
	guard := regexp.MustCompile(`\n  when *= "outdated > 0"`).FindString(view)
	if guard == "" {
		t.Fatal(`rollout_status has no when = "outdated > 0"`)
	}
	files["rollout.hcl"] = []byte(strings.Replace(view, guard, `
  absent = ["observed/instance/{svc}/retiring"]`+guard, 1))
	_, diags := rules.LoadFiles(files)
	var cycles []string
	for _, d := range diags {
		if d.Summary == "Cycle through negation" {
			cycles = append(cycles, d.Error())
		}
	}
	if len(cycles) == 0 {
		t.Fatalf("no cycle reported:\n%s", diags.Error())
	}
	// One per cycle (retiring has two writers: retire_unhealthy and
	// collect_stopped's delete by prefix), each naming its rules in order,
	// at replace_first's read of the view: the read that closes it.
	line := 1 + strings.Count(string(files["rollout.hcl"])[:strings.Index(string(files["rollout.hcl"]), `rollout   = "observed`)], "\n")
	at := fmt.Sprintf("rollout.hcl:%d,", line)
	seen := map[string]bool{}
	for _, c := range cycles {
		rules := c[strings.Index(c, "Rules "):strings.Index(c, " form a cycle")]
		if seen[rules] {
			t.Errorf("two diagnostics for one cycle: %s", rules)
		}
		seen[rules] = true
		if !strings.HasPrefix(rules, "Rules rollout_status, ") || !strings.HasSuffix(rules, ", replace_first") {
			t.Errorf("the cycle is not named from the view to the action that reads it: %s", c)
		}
		if !strings.Contains(c, `Rule "replace_first" reads the view of "rollout_status"`) || !strings.HasPrefix(c, at) {
			t.Errorf("not reported at replace_first's read of the view: %s", c)
		}
	}
	if len(cycles) != 2 {
		t.Errorf("%d cycles reported, want 2 (one per writer of retiring)", len(cycles))
	}
}
