package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestUntimedCommandsExist: every command exempt from --timeout is one the
// binary has (a renamed command would silently get the deadline), and the
// client commands are not exempt.
func TestUntimedCommandsExist(t *testing.T) {
	root := newRootCmd()
	for path := range untimed {
		c, _, err := root.Find(strings.Fields(path)[1:])
		if err != nil || c.CommandPath() != path {
			t.Errorf("untimed %q: no such command (found %v, %v)", path, c.CommandPath(), err)
		}
	}
	for _, path := range []string{"ccattler apply", "ccattler get", "ccattler delete", "ccattler facts get", "ccattler cluster members"} {
		if untimed[path] {
			t.Errorf("%s runs without a deadline", path)
		}
	}
}

// The deadline's message names the endpoints the command dialled: the
// default plain one becomes https:// when certificates were found, and
// naming the flag's http:// then sent users looking at the wrong URL.
func TestDeadlineNamesTheDialledEndpoints(t *testing.T) {
	saved := *g
	t.Cleanup(func() { *g = saved })
	g.deadlined, g.timeout, g.etcd = true, 10*time.Second, defaultEtcdPlain
	g.dialled = nil
	if err := explainDeadline(context.DeadlineExceeded); err == nil || !strings.Contains(err.Error(), "etcd at "+defaultEtcdPlain+" did not answer") {
		t.Errorf("before any dial: %v; want the flag's endpoint", err)
	}
	g.dialled = []string{defaultEtcdSecure}
	if err := explainDeadline(context.DeadlineExceeded); err == nil || !strings.Contains(err.Error(), "etcd at "+defaultEtcdSecure+" did not answer") {
		t.Errorf("after dialling %s: %v", defaultEtcdSecure, err)
	}
}
