package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/spf13/cobra"
)

// defaultWaitTimeout bounds apply --wait when --timeout is not given: a
// rollout of a few instances, with image pulls, takes longer than the 10s
// a plain request may.
const defaultWaitTimeout = 5 * time.Minute

// convergence is how far one service is from what was applied, read from
// the facts at one revision.
type convergence struct {
	Service   string `json:"service"`
	Target    int    `json:"target"`    // effective/service/{name}/instances (-1: none yet)
	Live      int    `json:"live"`      // pending or running instances
	Running   int    `json:"running"`   // running, on the desired image
	Healthy   int    `json:"healthy"`   // of those, healthy
	Endpoints int    `json:"endpoints"` // of those, with an endpoint (when the service exposes a port)
	Exposes   bool   `json:"exposes"`
	Pending   string `json:"waiting_for,omitempty"` // what is missing, in words; "" when converged
}

func (c convergence) converged() bool { return c.Pending == "" }

func (c convergence) String() string {
	s := fmt.Sprintf("%s: %d/%d running, %d healthy", c.Service, c.Running, max(c.Target, 0), c.Healthy)
	if c.Exposes {
		s += fmt.Sprintf(", %d %s", c.Endpoints, plural(c.Endpoints, "endpoint", "endpoints"))
	}
	if c.Pending != "" {
		s += " (waiting for " + c.Pending + ")"
	}
	return s
}

// readConvergence reads, at one revision, how far each service is: it is
// converged when the effective count is the one the applied intent yields,
// that many instances run the desired image and are healthy, each has an
// endpoint when the service exposes a port, and no other instance of it is
// live (a rollout's old ones are gone).
func readConvergence(ctx context.Context, s *facts.Store, services []string) ([]convergence, error) {
	trees := map[string][]facts.Fact{}
	var rev int64
	for _, tree := range []string{"desired/service/", "effective/service/", "intent/", "observed/instance/", "endpoint/service/"} {
		fs, r, err := s.List(ctx, tree, rev)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", tree, err)
		}
		rev, trees[tree] = r, fs
	}
	val := map[string][]byte{}
	for _, fs := range trees {
		for _, f := range fs {
			val[f.Key] = f.Value
		}
	}
	str := func(k string) string { v, _ := facts.StringValue(val[k]); return v }
	num := func(k string) (int, bool) {
		var n int
		raw, ok := val[k]
		if !ok || json.Unmarshal(raw, &n) != nil {
			return 0, false
		}
		return n, true
	}
	exposes := map[string]bool{}
	for _, f := range trees["desired/service/"] {
		if name, _, ok := strings.Cut(strings.TrimPrefix(f.Key, "desired/service/"), "/expose/"); ok {
			exposes[name] = true
		}
	}
	byService := map[string][]string{}
	for _, f := range trees["observed/instance/"] {
		if id, ok := instanceFact(f.Key, "service"); ok {
			if svc, ok := facts.StringValue(f.Value); ok {
				byService[svc] = append(byService[svc], id)
			}
		}
	}
	var out []convergence
	for _, name := range services {
		c := convergence{Service: name, Target: -1}
		if _, ok := val[facts.DesiredService(name)]; !ok {
			c.Pending = "its desired facts: the service is not declared"
			out = append(out, c)
			continue
		}
		image := str(facts.ServiceImage(name))
		c.Exposes = exposes[name]
		for _, id := range byService[name] {
			st := str(facts.InstanceState(id))
			if st == "pending" || st == "running" {
				c.Live++
			}
			if st != "running" || str(facts.InstanceImage(id)) != image {
				continue
			}
			c.Running++
			if str(facts.InstanceHealth(id)) != "healthy" {
				continue
			}
			c.Healthy++
			if _, ok := val[facts.Endpoint(name, id)]; ok {
				c.Endpoints++
			}
		}
		target, haveTarget := num(facts.EffectiveInstances(name))
		if haveTarget {
			c.Target = target
		}
		user, haveUser := num(facts.Intent("user", name))
		_, overridden := val[facts.Intent("policy", name)]
		_, autoscaled := val[facts.Intent("autoscaler", name)]
		autoscaled = autoscaled && val[facts.ServiceAutoscaleMetric(name)] != nil
		ready := c.Healthy
		if c.Exposes {
			ready = c.Endpoints
		}
		switch {
		case !haveTarget && !haveUser && !overridden && !autoscaled:
			// No layer sets a count (apply warned): none is to run.
			c.Target = 0
			if c.Live > 0 {
				c.Pending = fmt.Sprintf("%d more to stop", c.Live)
			}
		case !haveTarget:
			c.Pending = "the intent resolver to set effective/service/" + name + "/instances"
		case haveUser && !overridden && !autoscaled && target != user:
			c.Pending = fmt.Sprintf("the effective count to become %d, not %d", user, target)
		case c.Running < target:
			c.Pending = fmt.Sprintf("%d more running on %s", target-c.Running, image)
		case c.Healthy < target:
			c.Pending = fmt.Sprintf("%d more healthy", target-c.Healthy)
		case ready < target:
			c.Pending = fmt.Sprintf("%d more %s", target-ready, plural(target-ready, "endpoint", "endpoints"))
		case c.Live > target:
			c.Pending = fmt.Sprintf("%d more to stop", c.Live-target)
		}
		out = append(out, c)
	}
	return out, nil
}

// instanceFact returns the id of key when it is observed/instance/{id}/{attr}.
func instanceFact(key, attr string) (string, bool) {
	rest, under := strings.CutPrefix(key, "observed/instance/")
	id, ok := strings.CutSuffix(rest, "/"+attr)
	return id, under && ok && id != "" && !strings.Contains(id, "/")
}

// servicesOf names the services doc declares.
func servicesOf(doc *spec.Doc) []string {
	var out []string
	for _, o := range doc.Objects {
		if o.Kind == spec.KindService {
			out = append(out, o.Name)
		}
	}
	return out
}

// waitConverged polls until every one of services is converged, printing
// each change of a service's progress on progress. It fails naming the
// services that did not converge by the deadline.
func waitConverged(ctx context.Context, s *facts.Store, services []string, within time.Duration, progress io.Writer) error {
	if len(services) == 0 {
		return nil
	}
	return poll(ctx, within, progress, func(ctx context.Context) (lines, left []string, err error) {
		cs, err := readConvergence(ctx, s, services)
		for _, c := range cs {
			lines = append(lines, c.String())
			if !c.converged() {
				left = append(left, c.String())
			}
		}
		if len(cs) > progressEach {
			// One line of totals, naming the first few still waiting.
			line := fmt.Sprintf("%d services: %d converged", len(cs), len(cs)-len(left))
			if len(left) > 0 {
				line += fmt.Sprintf(", waiting for %s", strings.Join(left[:min(len(left), 3)], "; "))
				if len(left) > 3 {
					line += fmt.Sprintf("; %d more", len(left)-3)
				}
			}
			lines = []string{line}
		}
		return lines, left, err
	}, doneLine("converged", services), "convergence", "not converged", "ccattler get instances and ccattler why-not show why")
}

// progressEach is how many services apply --wait and delete --wait report
// one by one; more are reported as one line of totals.
const progressEach = 10

// doneLine is what a --wait prints once every one of services is done:
// "converged: web, api", or past progressEach their number.
func doneLine(verb string, services []string) string {
	if len(services) > progressEach {
		return fmt.Sprintf("%s: %d services", verb, len(services))
	}
	return verb + ": " + strings.Join(services, ", ")
}

// poll reads progress every 250 ms (or as long as a read took) until
// nothing is left or within passes, printing each line that changed since
// the last read. Done, it prints done; at the deadline it fails (exit 1)
// with what is left, as "--wait: unmet within T: LEFT (hint)", or
// "--wait: what not read within T" when no read succeeded.
func poll(ctx context.Context, within time.Duration, progress io.Writer, read func(context.Context) (lines, left []string, err error), done, what, unmet, hint string) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last, left []string // the lines printed last; what was left at the last read
	for {
		began := time.Now()
		lines, now, err := read(ctx)
		// A read of a large cluster takes a while: wait as long again,
		// so that a waiting client never takes more than half a core.
		pause := max(250*time.Millisecond, time.Since(began))
		if err == nil {
			for i, line := range lines {
				if i >= len(last) || line != last[i] {
					fmt.Fprintf(progress, "%s  %s\n", stamp(time.Now()), line)
				}
			}
			last, left = lines, now
			if len(left) == 0 {
				fmt.Fprintln(progress, done)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if left == nil { // no read succeeded
				return exitError{code: 1, err: fmt.Errorf("--wait: %s not read within %s: %v", what, within.Round(100*time.Millisecond), err)}
			}
			slices.Sort(left)
			return exitError{code: 1, err: fmt.Errorf("--wait: %s within %s: %s (%s)", unmet, within.Round(100*time.Millisecond), strings.Join(left, "; "), hint)}
		case <-time.After(pause):
		}
	}
}

// applyWait is --wait of apply, scale and rollback.
func applyWait(cmd *cobra.Command, s *facts.Store, services []string) error {
	ctx, within := waitBounds(cmd)
	return waitConverged(ctx, s, services, within, cmd.ErrOrStderr())
}

// waitBounds is the context and time a --wait has: --timeout bounds the
// whole command when given; otherwise the wait has defaultWaitTimeout of
// its own.
func waitBounds(cmd *cobra.Command) (context.Context, time.Duration) {
	ctx, within := context.WithoutCancel(cmd.Context()), defaultWaitTimeout
	if cmd.Flags().Changed("timeout") {
		ctx, within = cmd.Context(), g.timeout
		if d, ok := ctx.Deadline(); ok {
			within = time.Until(d)
		} else if within <= 0 {
			within = 100 * 365 * 24 * time.Hour // --timeout 0: no limit
		}
	}
	return ctx, within
}
