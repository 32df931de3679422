package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
)

// events --rule checks its name before it reads: a default policy's rule
// without a read of the records (here, with a context already done), one
// of a server's own policies by the first record naming it, and only a
// name no record has after reading every record, to list the known ones.
func TestCheckRuleNameReadsOnlyWhatItMust(t *testing.T) {
	ctx := context.Background()
	s := etcdtest.Start(t).Store(t)
	ids := facts.NewEventIDs()
	for _, rule := range []string{"my_policy", "schedule", "apply"} {
		id, _ := ids.Next()
		b, err := json.Marshal(facts.EventRecord{Rule: rule})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutValue(ctx, facts.Event(id), json.RawMessage(b)); err != nil {
			t.Fatal(err)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := checkRuleName(done, s, "publish_endpoint", false, io.Discard); err != nil {
		t.Errorf("a default policy's rule with etcd out of reach: %v, want it known without a read", err)
	}
	if err := checkRuleName(done, s, "my_policy", false, io.Discard); err == nil {
		t.Errorf("a rule only the records name, with etcd out of reach: no error; want the failed read")
	}
	if err := checkRuleName(ctx, s, "my_policy", false, io.Discard); err != nil {
		t.Errorf("a rule a record names: %v", err)
	}
	err := checkRuleName(ctx, s, "my_polciy", false, io.Discard)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "my_policy") || !strings.Contains(err.Error(), "publish_endpoint") {
		t.Errorf("a rule nothing names: %v; want a usage error listing my_policy and the default rules", err)
	}
	var warned strings.Builder
	if err := checkRuleName(ctx, s, "my_polciy", true, &warned); err != nil || !strings.Contains(warned.String(), "warning: --rule \"my_polciy\"") {
		t.Errorf("with --follow: %v, warned %q; want a warning", err, warned.String())
	}
}
