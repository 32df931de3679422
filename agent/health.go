package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DefaultHealthInterval is used when a service declares no health/interval.
const DefaultHealthInterval = 10 * time.Second

// Health checks, per the service's health block, against the instance's ip
// and its first exposed port:
//
//	GET / HEAD   an HTTP request to http://ip:port/path; a 2xx or 3xx answer is healthy
//	TCP          a connection to ip:port is healthy
//	(no block)   a TCP check if the service exposes a port, else healthy while it runs
//
// A check that cannot be made (a method without a port) leaves it unknown.

// check runs one health check and returns healthy or unhealthy, with the reason for the latter.
func check(ctx context.Context, sp Spec, ip string, client *http.Client) (string, string) {
	method := sp.Health.Method
	if len(sp.Ports) == 0 {
		if method == "" {
			return Healthy, ""
		}
		return Unknown, fmt.Sprintf("health method %s needs an exposed port", method)
	}
	if method == "" {
		method = "TCP"
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(sp.Ports[0]))
	switch method {
	case "TCP":
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return Unhealthy, err.Error()
		}
		c.Close()
		return Healthy, ""
	case "GET", "HEAD":
		path := sp.Health.Path
		if path == "" {
			path = "/"
		}
		req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
		if err != nil {
			return Unknown, err.Error()
		}
		resp, err := client.Do(req)
		if err != nil {
			return Unhealthy, err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode < 400 {
			return Healthy, ""
		}
		return Unhealthy, resp.Status
	}
	return Unknown, fmt.Sprintf("unknown health method %q", method)
}

// probeHandle is a running health check loop.
type probeHandle struct {
	cancel context.CancelFunc
	hs     HealthSpec // what it checks; a change of the service's health block restarts it
}

// ensureProbeLocked starts the health checks of a running instance unless
// they run as the service's health block now says. The port is the one the
// container was started with: it listens there whatever the service says now.
func (n *node) ensureProbeLocked(ctx context.Context, id string, st *Status) {
	sp := st.Spec
	if w, ok := n.wants[id]; ok && n.live && w.Spec.Image != "" {
		sp.Health = w.Spec.Health
	}
	if p, ok := n.probes[id]; ok {
		if p.hs == sp.Health {
			return
		}
		p.cancel()
		n.log.Info("health block changed; checking anew", "instance", id, "method", sp.Health.Method, "path", sp.Health.Path)
	}
	pctx, cancel := context.WithCancel(ctx)
	n.probes[id] = probeHandle{cancel: cancel, hs: sp.Health}
	n.health[id] = Unknown
	go n.probe(pctx, id, sp, st.IP)
}

func (n *node) stopProbeLocked(id string) {
	if p, ok := n.probes[id]; ok {
		p.cancel()
		delete(n.probes, id)
	}
	delete(n.health, id)
}

func (n *node) stopProbes() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id := range n.probes {
		n.stopProbeLocked(id)
	}
}

func (n *node) probe(ctx context.Context, id string, sp Spec, ip string) {
	every := sp.Health.Interval
	if every <= 0 {
		every = DefaultHealthInterval
	}
	timeout := min(every, 5*time.Second)
	client := &http.Client{
		Timeout: timeout,
		// A health endpoint's redirect is an answer, not an instruction to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{DisableKeepAlives: true},
	}
	// The first check comes soon after start, so a healthy instance gets an endpoint quickly.
	first := time.NewTimer(min(every, 500*time.Millisecond))
	defer first.Stop()
	select {
	case <-ctx.Done():
		return
	case <-first.C:
	}
	t := time.NewTicker(every)
	defer t.Stop()
	last := ""
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		h, why := check(cctx, sp, ip, client)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if h != last {
			n.log.Info("health changed", "instance", id, "health", h, "reason", why)
			last = h
			n.mu.Lock()
			if p, ok := n.probes[id]; ok && p.hs == sp.Health { // not a replaced loop's late answer
				n.health[id] = h
			}
			n.mu.Unlock()
			n.poke()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
