package agent

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// buildWant resolves the desired/service/{svc}/... attributes an instance
// needs into a Spec. A missing service or image leaves the want not ready
// (the agent waits); a value that does not decode (e.g. memory "12XB"
// written past validation) makes it an error the agent reports.
func buildWant(id, svc string, attrs map[string][]byte, schema *facts.Schema) Want {
	w := Want{Spec: Spec{ID: id, Service: svc}}
	if attrs == nil {
		return w
	}
	var errs []string
	decode := func(attr string) (any, bool) {
		raw, ok := attrs[attr]
		if !ok {
			return nil, false
		}
		_, v, err := schema.Decode(facts.ServiceAttr(svc, attr), raw)
		if err != nil {
			errs = append(errs, err.Error())
			return nil, false
		}
		return v, true
	}
	if v, ok := decode("image"); ok {
		w.Spec.Image, _ = v.(string)
	}
	if v, ok := decode("resources/cpu"); ok {
		w.Spec.CPU, _ = v.(float64)
	}
	if v, ok := decode("resources/memory"); ok {
		w.Spec.Memory, _ = v.(int64)
	}
	if v, ok := decode("health/method"); ok {
		w.Spec.Health.Method, _ = v.(string)
	}
	if v, ok := decode("health/path"); ok {
		w.Spec.Health.Path, _ = v.(string)
	}
	if v, ok := decode("health/interval"); ok {
		w.Spec.Health.Interval, _ = v.(time.Duration)
	}
	if v, ok := decode("volume"); ok {
		w.Spec.Volume, _ = v.(string)
	}
	if v, ok := decode("spec_digest"); ok {
		w.Spec.Digest, _ = v.(string)
	}
	if v, ok := decode("command"); ok {
		w.Spec.Command = strs(v)
	}
	if v, ok := decode("args"); ok {
		w.Spec.Args = strs(v)
	}
	for attr := range attrs {
		for _, m := range []struct {
			prefix string
			into   *map[string]string
		}{{"env/", &w.Spec.Env}, {"labels/", &w.Spec.Labels}} {
			if name, ok := strings.CutPrefix(attr, m.prefix); ok {
				if v, ok := decode(attr); ok {
					if *m.into == nil {
						*m.into = map[string]string{}
					}
					(*m.into)[name], _ = v.(string)
				}
			}
		}
		if p, ok := strings.CutPrefix(attr, "expose/"); ok {
			port, err := strconv.Atoi(p)
			if err != nil || port < 1 || port > 65535 {
				errs = append(errs, fmt.Sprintf("%s: %q is not a port from 1 to 65535", facts.ServiceAttr(svc, attr), p))
				continue
			}
			w.Spec.Ports = append(w.Spec.Ports, port)
		}
	}
	sort.Ints(w.Spec.Ports)
	if len(errs) > 0 {
		sort.Strings(errs)
		w.Err = strings.Join(errs, "; ")
		return w
	}
	w.Ready = w.Spec.Image != ""
	return w
}

// strs converts a decoded list of strings (facts.KindJSON "strings").
func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}
