package rules

import (
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

func prefixRule(head string) string {
	return `rule "forget" {
  doc       = "d"
  principal = "instances"
  match {
    last = "observed/service/{svc}/restart/last_failure"
  }
  absent = ["desired/service/{svc}"]
  delete "` + head + `" {}
}
`
}

// TestPrefixDelete checks a delete by prefix stands for one delete head per
// key form under the prefix.
func TestPrefixDelete(t *testing.T) {
	rs, diags := load(t, map[string]string{"r.hcl": prefixRule("observed/service/{svc}/restart/")})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r, _ := rs.Rule("forget")
	var got []string
	for _, h := range r.Heads {
		if h.Kind != Delete {
			t.Errorf("%s is a %s head", h.Template, h.Kind)
		}
		got = append(got, h.Template)
	}
	sort.Strings(got)
	want := "observed/service/{svc}/restart/failures observed/service/{svc}/restart/hold observed/service/{svc}/restart/image observed/service/{svc}/restart/last_failure observed/service/{svc}/restart/reason"
	if strings.Join(got, " ") != want {
		t.Errorf("heads %v\nwant %s", got, want)
	}
}

// TestPrefixDeleteLeavesViews checks a delete by prefix leaves the keys a
// view maintains to the view: no conflict, no head for them.
func TestPrefixDeleteLeavesViews(t *testing.T) {
	rs, diags := load(t, map[string]string{"r.hcl": `rule "collect" {
  doc       = "d"
  principal = "gc"
  match {
    state = "observed/instance/{id}/state"
  }
  when = "state == 'stopped'"
  delete "observed/instance/{id}/" {}
}

rule "disown" {
  doc       = "d"
  principal = "failure"
  match {
    inode = "observed/instance/{id}/node"
    node  = "placement/instance/{id}"
  }
  when = "inode != node"
  derive "observed/instance/{id}/disowned" {
    value = "inode"
  }
}
`})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	r, _ := rs.Rule("collect")
	seen := map[string]bool{}
	for _, h := range r.Heads {
		seen[h.Template] = true
	}
	if seen["observed/instance/{id}/disowned"] || !seen["observed/instance/{id}/resources/cpu"] || !seen["observed/instance/{id}/state"] {
		t.Errorf("heads %v: want every form under the prefix but the view's", seen)
	}
}

func TestPrefixDeleteErrors(t *testing.T) {
	cases := []struct{ head, summary, detail string }{
		{"observed/service/{svc}/", "Prefix delete over a variable", "comes after the prefix"},
		{"observed/service/{name}/restart/", "Unbound variable in head", "is bound by no pattern"},
		{"observed/service/{svc}/restart/hold/", "Empty prefix", "No key form"},
	}
	for _, tc := range cases {
		t.Run(tc.head, func(t *testing.T) {
			rs, diags := load(t, map[string]string{"r.hcl": prefixRule(tc.head)})
			if rs != nil {
				t.Fatal("loaded")
			}
			for _, d := range diags {
				if d.Severity == hcl.DiagError && d.Summary == tc.summary && strings.Contains(d.Detail, tc.detail) {
					if d.Subject == nil || d.Subject.Start.Line != 8 {
						t.Errorf("reported at %v, want the head on line 8", d.Subject)
					}
					return
				}
			}
			t.Fatalf("no %q in:\n%s", tc.summary, diags.Error())
		})
	}
}
