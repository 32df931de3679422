package whatif_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/engine/whatif"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/rules"
)

const create = `rule "create_instances" {
  doc       = "Create pending instances under fresh ids until a service has as many as it asks for."
  principal = "instances"
  match {
    want = "desired/service/{name}/instances"
  }
  aggregate "live" {
    match {
      name  = "observed/instance/{i}/service"
    }
    count = true
  }
  when = "live < want"
  fresh "id" {
    count = "want - live"
  }
  emit "observed/instance/{id}/service" {
    value = "name"
  }
  emit "observed/instance/{id}/state" {
    value = "'pending'"
  }
}
`

const schedule = `rule "schedule" {
  doc       = "Place a pending instance on an alive node by score."
  principal = "scheduler"
  match {
    state = "observed/instance/{id}/state"
  }
  absent = ["placement/instance/{id}"]
  when   = "state == 'pending'"
  choose "node" {
    match {
      nstate = "observed/node/{node}/state"
    }
    aggregate "placed" {
      match {
        node = "placement/instance/{other}"
      }
      count = true
    }
    filters {
      alive = "nstate == 'alive'"
    }
    score = "SCORE"
  }
  emit "placement/instance/{id}" {
    value = "node"
  }
}
`

func load(t *testing.T, schema *facts.Schema, srcs ...string) *rules.RuleSet {
	t.Helper()
	files := map[string][]byte{}
	for i, s := range srcs {
		files[fmt.Sprintf("r%d.hcl", i)] = []byte(s)
	}
	rs, diags := rules.LoadFiles(files, rules.WithSchema(schema))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return rs
}

func TestCompare(t *testing.T) {
	schema := facts.NewSchema()
	spread := strings.Replace(schedule, "SCORE", "-double(placed)", 1)
	pack := strings.Replace(schedule, "SCORE", "double(placed)", 1)
	sets := map[string]*rules.RuleSet{
		"spread":       load(t, schema, create, spread),
		"pack":         load(t, schema, create, pack),
		"no scheduler": load(t, schema, create),
	}
	snapshot := []facts.Fact{
		{Key: "desired/service/web/instances", Value: []byte("3"), ModRevision: 5},
		{Key: "observed/node/node-1/state", Value: []byte(`"alive"`), ModRevision: 2},
		{Key: "observed/node/node-2/state", Value: []byte(`"alive"`), ModRevision: 3},
		{Key: "observed/node/node-3/state", Value: []byte(`"alive"`), ModRevision: 4},
	}
	cases := []struct {
		running, next string
		want          []string // op key=value (running value) by rule
	}{
		{"spread", "spread", nil},
		{"pack", "spread", []string{"schedule: change placement/instance/* = \"node-2\" (\"node-1\")", "schedule: change placement/instance/* = \"node-3\" (\"node-1\")"}},
		{"no scheduler", "pack", []string{"schedule: put placement/instance/* = \"node-1\" ()", "schedule: put placement/instance/* = \"node-1\" ()", "schedule: put placement/instance/* = \"node-1\" ()"}},
		{"spread", "no scheduler", []string{"schedule: delete placement/instance/* =  (\"node-1\")", "schedule: delete placement/instance/* =  (\"node-2\")", "schedule: delete placement/instance/* =  (\"node-3\")"}},
	}
	for _, tc := range cases {
		t.Run(tc.next+" against "+tc.running, func(t *testing.T) {
			d := whatif.Compare(snapshot, 5, sets[tc.running], sets[tc.next], whatif.Options{})
			var got []string
			for _, c := range d.Changes {
				key := c.Key[:strings.LastIndex(c.Key, "/")+1] + "*" // fresh ids
				got = append(got, fmt.Sprintf("%s: %s %s = %s (%s)", c.Rule, c.Op, key, c.Value, c.Was))
			}
			sort.Strings(got)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			// Fresh ids come from one seed: the shared rule creates the
			// same instances in both runs, so they are no difference.
			if d.Running.Firings["create_instances"] != 3 || d.Next.Firings["create_instances"] != 3 || !d.Running.Fixpoint || !d.Next.Fixpoint {
				t.Errorf("outcomes: running %+v, candidate %+v", d.Running, d.Next)
			}
			if d.Rev != 5 || d.Facts != len(snapshot) {
				t.Errorf("revision %d, %d facts", d.Rev, d.Facts)
			}
		})
	}
}

// A set that never settles is reported as such, not looped on.
func TestCompareNoFixpoint(t *testing.T) {
	schema := facts.NewSchema()
	grow := `rule "grow" {
  doc       = "Ask for one more instance, forever."
  principal = "autoscaler"
  match {
    n = "intent/autoscaler/service/{s}/instances"
  }
  emit "intent/autoscaler/service/{s}/instances" {
    value = "n + 1"
  }
}
`
	rs, diags := rules.LoadFiles(map[string][]byte{"g.hcl": []byte(grow)}, rules.WithSchema(schema))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	snapshot := []facts.Fact{{Key: "intent/autoscaler/service/web/instances", Value: []byte("1"), ModRevision: 1}}
	d := whatif.Compare(snapshot, 1, load(t, schema, create), rs, whatif.Options{MaxRounds: 10})
	if d.Next.Fixpoint || d.Next.Rounds != 10 {
		t.Errorf("candidate outcome %+v: want no fixpoint after 10 rounds", d.Next)
	}
}

// WithChange shows what one rule set does because of a change of the facts:
// raising a service from 1 to 3 instances, on a cluster converged at 1,
// creates and places two instances; the key the change itself sets (the
// count) is no difference of the rules'.
func TestWithChange(t *testing.T) {
	schema := facts.NewSchema()
	rs := load(t, schema, create, strings.Replace(schedule, "SCORE", "-double(placed)", 1))
	before := []facts.Fact{
		{Key: "desired/service/web/instances", Value: []byte("1"), ModRevision: 5},
		{Key: "observed/node/node-1/state", Value: []byte(`"alive"`), ModRevision: 2},
		{Key: "observed/node/node-2/state", Value: []byte(`"alive"`), ModRevision: 3},
		{Key: "observed/instance/a0001/service", Value: []byte(`"web"`), ModRevision: 6},
		{Key: "observed/instance/a0001/state", Value: []byte(`"running"`), ModRevision: 6},
		{Key: "placement/instance/a0001", Value: []byte(`"node-1"`), ModRevision: 7},
	}
	after := append([]facts.Fact(nil), before...)
	after[0] = facts.Fact{Key: "desired/service/web/instances", Value: []byte("3"), ModRevision: 5}
	d := whatif.WithChange(before, after, 7, rs, whatif.Options{})
	n := map[string]int{}
	for _, c := range d.Changes {
		if c.Op != whatif.Put || c.Was != nil {
			t.Errorf("change %+v: want a put of a key absent without the change", c)
		}
		switch {
		case strings.HasPrefix(c.Key, "desired/"):
			t.Errorf("the change's own key %s is listed as the rules'", c.Key)
		case strings.HasSuffix(c.Key, "/state"):
			n["created"]++
		case strings.HasPrefix(c.Key, "placement/instance/"):
			n["placed"]++
		}
	}
	if n["created"] != 2 || n["placed"] != 2 {
		t.Errorf("created %d, placed %d; want 2 and 2: %+v", n["created"], n["placed"], d.Changes)
	}
	if len(d.Running.Firings) != 0 || d.Next.Firings["create_instances"] == 0 || d.Next.Firings["schedule"] != 2 {
		t.Errorf("firings without %v, with %v", d.Running.Firings, d.Next.Firings)
	}
	// No change: nothing to show.
	if d := whatif.WithChange(before, before, 7, rs, whatif.Options{}); len(d.Changes) != 0 {
		t.Errorf("no change, yet %+v", d.Changes)
	}
}

// Each run is determined by its rules, facts, seed and clock (Compare
// runs the same set on the same facts once, on that ground): the same set
// on equal facts (copies, so both run) ends the same, firing for firing,
// on 30 instances drawn fresh and placed by score among ties.
func TestRunsAreDetermined(t *testing.T) {
	schema := facts.NewSchema()
	rs := load(t, schema, create, strings.Replace(schedule, "SCORE", "-double(placed)", 1))
	before := []facts.Fact{{Key: "desired/service/web/instances", Value: []byte("30"), ModRevision: 1}}
	for i := range 7 {
		before = append(before, facts.Fact{Key: fmt.Sprintf("observed/node/node-%d/state", i), Value: []byte(`"alive"`), ModRevision: int64(2 + i)})
	}
	for range 20 {
		same := append([]facts.Fact(nil), before...)
		d := whatif.WithChange(before, same, 9, rs, whatif.Options{})
		if len(d.Changes) != 0 {
			t.Fatalf("the same set on equal facts differs: %+v", d.Changes)
		}
		if d.Running.Firings["schedule"] != 30 || fmt.Sprint(d.Running) != fmt.Sprint(d.Next) {
			t.Fatalf("outcomes %+v and %+v: want the same, 30 placed", d.Running, d.Next)
		}
	}
}
