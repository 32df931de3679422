package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"google.golang.org/grpc"
)

// events --rule checks its name before it reads: a default policy's rule
// without a read of the records (here, with a context already done), one
// of a server's own policies by the first record naming it, and only a
// name no record has after reading every record, to list the known ones;
// when the caller has searched the records for the rule already, it does
// not search them again.
func TestCheckRuleNameReadsOnlyWhatItMust(t *testing.T) {
	ctx := context.Background()
	var ranges atomic.Int64
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/Range") {
			ranges.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	s := etcdtest.Start(t).StoreWith(t, grpc.WithChainUnaryInterceptor(count))
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
	if err := checkRuleName(done, s, "publish_endpoint", false, false, io.Discard); err != nil {
		t.Errorf("a default policy's rule with etcd out of reach: %v, want it known without a read", err)
	}
	if err := checkRuleName(done, s, "my_policy", false, false, io.Discard); err == nil {
		t.Errorf("a rule only the records name, with etcd out of reach: no error; want the failed read")
	}
	if err := checkRuleName(ctx, s, "my_policy", false, false, io.Discard); err != nil {
		t.Errorf("a rule a record names: %v", err)
	}
	err := checkRuleName(ctx, s, "my_polciy", false, false, io.Discard)
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "my_policy") || !strings.Contains(err.Error(), "publish_endpoint") {
		t.Errorf("a rule nothing names: %v; want a usage error listing my_policy and the default rules", err)
	}
	var warned strings.Builder
	if err := checkRuleName(ctx, s, "my_polciy", false, true, &warned); err != nil || !strings.Contains(warned.String(), "warning: --rule \"my_polciy\"") {
		t.Errorf("with --follow: %v, warned %q; want a warning", err, warned.String())
	}
	reads := func(searched bool) int64 {
		t.Helper()
		before := ranges.Load()
		err := checkRuleName(ctx, s, "my_polciy", searched, false, io.Discard)
		if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), "my_policy") {
			t.Errorf("a rule nothing names (searched %v): %v; want the usage error listing my_policy", searched, err)
		}
		return ranges.Load() - before
	}
	if again, once := reads(false), reads(true); once == 0 || once >= again {
		t.Errorf("a rule the caller searched the records for: %d reads, against %d without; want fewer", once, again)
	}
}
