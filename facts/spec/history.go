package spec

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ccattler/ccattler/facts"
)

// HistoryKeep is how many applied specs of a service are kept under
// desired/history/service/{name}/: the current one and those before it,
// for `ccattler rollback`.
const HistoryKeep = 5

// Revision is one applied spec of a service, as kept under
// desired/history/service/{name}/{event-id}: every fact the apply made the
// service's scope hold (its desired keys and the user's intent), and the
// id of the apply's record under event/ (the same id).
type Revision struct {
	ID    string                   `json:"-"`
	Event string                   `json:"event"`
	Facts map[string]facts.RawJSON `json:"facts"` // keys relative to the root
}

// historyOps are the writes that keep the history of each service whose
// facts the apply changes: its new spec, and the oldest beyond HistoryKeep
// deleted. They go in the apply's transaction, so a spec in the history
// was applied, and every apply is in the history.
func historyOps(ctx context.Context, s *facts.Store, rev int64, scopes []scope, want map[string][]byte, changes []Change, eventID string) ([]facts.Op, error) {
	var ops []facts.Op
	for _, sc := range scopes {
		name, ok := strings.CutPrefix(sc.base, "desired/service/")
		if !ok || want == nil || !slices.ContainsFunc(changes, func(c Change) bool { return sc.owns(c.Key) }) {
			continue
		}
		r := Revision{Event: "event/" + eventID, Facts: map[string]facts.RawJSON{}}
		for k, v := range want {
			if sc.owns(k) {
				r.Facts[k] = v
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode the history of %s: %w", name, err)
		}
		ops = append(ops, facts.Put(facts.ServiceHistory(name, eventID), b))
		old, err := historyKeys(ctx, s, name, rev)
		if err != nil {
			return nil, err
		}
		for len(old) > HistoryKeep-1 {
			ops = append(ops, facts.Delete(old[0]))
			old = old[1:]
		}
	}
	return ops, nil
}

// historyKeys lists a service's history keys at rev, oldest first (event
// ids sort by time).
func historyKeys(ctx context.Context, s *facts.Store, name string, rev int64) ([]string, error) {
	prefix := facts.ServiceHistory(name, "")
	fs, _, err := s.List(ctx, prefix, rev)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", prefix, err)
	}
	var keys []string
	for _, f := range fs {
		keys = append(keys, f.Key)
	}
	slices.Sort(keys)
	return keys, nil
}

// History returns the applied specs of a service, oldest first. A revision
// that does not decode, or names a key outside the service's own facts (the
// history is user-written, so it is checked like a file), is an error naming
// its key.
func History(ctx context.Context, s *facts.Store, name string) ([]Revision, error) {
	if err := facts.CheckSegment("name", name); err != nil {
		return nil, err
	}
	prefix := facts.ServiceHistory(name, "")
	fs, _, err := s.List(ctx, prefix, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", prefix, err)
	}
	sc := scopeOf(KindService, name)
	var out []Revision
	for _, f := range fs {
		var r Revision
		if err := json.Unmarshal(f.Value, &r); err != nil {
			return nil, fmt.Errorf("%s: not an applied spec: %v", f.Key, err)
		}
		r.ID = strings.TrimPrefix(f.Key, prefix)
		for _, k := range slices.Sorted(maps.Keys(r.Facts)) {
			if !sc.owns(k) {
				return nil, fmt.Errorf("%s: names %s, which is not a fact of service %q: refusing to restore it", f.Key, k, name)
			}
			if _, bad := s.Schema.CheckFact(facts.Fact{Key: k, Value: r.Facts[k]}); bad != nil {
				return nil, fmt.Errorf("%s: %s: %v", f.Key, k, bad)
			}
		}
		if _, ok := r.Facts[facts.DesiredService(name)]; !ok {
			return nil, fmt.Errorf("%s: holds no %s: not an applied spec", f.Key, facts.DesiredService(name))
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Revision) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Current returns the facts the service's scope holds now (nil: the service
// is not declared), for a change of one attribute such as `ccattler scale`.
func Current(ctx context.Context, s *facts.Store, name string) (map[string][]byte, error) {
	have, _, err := read(ctx, s, []scope{scopeOf(KindService, name)})
	if err != nil {
		return nil, err
	}
	if _, ok := have[facts.DesiredService(name)]; !ok {
		return nil, nil
	}
	out := map[string][]byte{}
	for k, f := range have {
		out[k] = f.Value
	}
	return out, nil
}

// Set makes the service's facts exactly want (keys of its scope only), as an apply.
func Set(ctx context.Context, s *facts.Store, name string, want map[string][]byte, opts Options) (Result, error) {
	sc := scopeOf(KindService, name)
	for k := range want {
		if !sc.owns(k) {
			return Result{}, fmt.Errorf("set service %s: %s is not one of its facts", name, k)
		}
	}
	return reconcile(ctx, s, []scope{sc}, want, opts)
}
