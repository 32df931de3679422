package agent_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/agent/sim"
)

// TestLogServer: the output of a node's instance is served; a bad id, an
// unknown node or instance are clear errors, not a file read.
func TestLogServer(t *testing.T) {
	cfg := sim.NewConfig()
	cfg.StartDelay = 0
	fleet, err := sim.NewFleet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rt := fleet.Node("n1")
	if _, err := rt.Start(context.Background(), agent.Spec{ID: "a0001", Service: "web", Image: "web:1",
		Command: []string{"/bin/web"}, Env: map[string]string{"B": "2", "A": "1"}}); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ls := &agent.LogServer{Addr: addr, Nodes: []agent.NodeConfig{{ID: "n1", Runtime: rt}}}
	go ls.Serve(ctx)
	get := func(url string) (int, string) {
		for i := 0; ; i++ {
			resp, err := http.Get(url)
			if err != nil {
				if i < 50 {
					time.Sleep(20 * time.Millisecond) // the server is starting
					continue
				}
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
	}
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/v1/logs/n1/a0001", 200, `command ["/bin/web"] args [] env ["A=1" "B=2"]`},
		{"/v1/logs/n1/..%2f..%2fetc", 400, "not an instance id"},
		{"/v1/logs/n1/NOTHEX", 400, "not an instance id"},
		{"/v1/logs/n2/a0001", 404, `node "n2" is not served here`},
		{"/v1/logs/n1/b0001", 404, "no output of instance b0001"},
	} {
		code, body := get(fmt.Sprintf("http://%s%s", addr, tc.path))
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %q, want %d with %q", tc.path, code, body, tc.code, tc.want)
		}
	}

	// Followed, the stream stays open while the container runs and ends
	// when it is gone.
	resp, err := http.Get(fmt.Sprintf("http://%s/v1/logs/n1/a0001?follow=true", addr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan string)
	go func() { b, _ := io.ReadAll(resp.Body); done <- string(b) }()
	select {
	case b := <-done:
		t.Fatalf("the followed stream ended while the container runs: %q", b)
	case <-time.After(time.Second):
	}
	_ = rt.Stop(context.Background(), "a0001", 0)
	select {
	case b := <-done:
		if !strings.Contains(b, "sim: instance a0001 of web") {
			t.Errorf("followed output %q", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the followed stream did not end after the container was removed")
	}
}
