package eval_test

import (
	"fmt"
	"testing"

	"github.com/ccattler/ccattler/engine/eval"
)

// pendingOfServices is the scheduler's body in small: every pending
// instance of a service that exists.
const pendingOfServices = `
rule "mark" {
  doc       = "Every pending instance of an existing service is noted."
  principal = "scheduler"
  match {
    exists = "desired/service/{svc}"
    svc    = "observed/instance/{id}/service"
    state  = "observed/instance/{id}/state"
  }
  when = "state == 'pending'"
  emit "placement/instance/{id}" { value = "'node-1'" }
}
`

// TestJoinWeighsAScanByWhatFollows: evaluated whole, the rule starts from
// the pending instances, not from the services, though there are fewer
// services: each service leads to all its instances, running or not, and
// the pending are fewer than the instances. The facts visited stay near
// the pending instances' count, not the instances'.
func TestJoinWeighsAScanByWhatFollows(t *testing.T) {
	rs := loadSrc(t, pendingOfServices)
	tb := newTable()
	const services, perService, pending = 50, 40, 100
	for s := range services {
		svc := fmt.Sprintf("svc-%02d", s)
		tb.put("desired/service/"+svc, `{}`)
		for i := range perService {
			id := fmt.Sprintf("%02x%03x", s, i)
			tb.put("observed/instance/"+id+"/service", `"`+svc+`"`)
			state := `"running"`
			if (s*perService+i)%(services*perService/pending) == 0 {
				state = `"pending"`
			}
			tb.put("observed/instance/"+id+"/state", state)
		}
	}
	ev := eval.New(rs)
	p := ev.Full(tb)
	if len(p.Firings) != pending {
		t.Fatalf("%d firings, want one for each of the %d pending instances", len(p.Firings), pending)
	}
	visited := ev.Stats().FactsVisited
	t.Logf("facts visited: %d (%d services, %d instances, %d pending)", visited, services, services*perService, pending)
	if visited > 8*pending+services {
		t.Errorf("visited %d facts: it scanned the instances of every service (%d), want about the pending ones' (%d) few lookups each", visited, services*perService, pending)
	}
}
