package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// Event is one record with its id and the revision it was committed at.
type Event struct {
	ID  string `json:"id"`
	Rev int64  `json:"rev"`
	facts.EventRecord
}

// Filter selects records. Zero fields select everything.
type Filter struct {
	Rule      string    // exact rule name
	KeyPrefix string    // a write or read key starts with it
	Since     time.Time // recorded at or after
}

// Match reports whether e passes the filter.
func (f Filter) Match(e Event) bool {
	if f.Rule != "" && e.Rule != f.Rule {
		return false
	}
	if !f.Since.IsZero() {
		if t, ok := facts.EventTime(e.ID); !ok || t.Before(f.Since) {
			return false
		}
	}
	if f.KeyPrefix != "" {
		hit := false
		for _, w := range e.Writes {
			hit = hit || strings.HasPrefix(w.Key, f.KeyPrefix)
		}
		for _, r := range e.Reads {
			hit = hit || strings.HasPrefix(r.Key, f.KeyPrefix)
		}
		if !hit {
			return false
		}
	}
	return true
}

// Raw returns a test of a record's stored bytes that every record the
// filter matches passes, nil when the filter names no text: the rule's
// name as a JSON string ("schedule", quotes included, so that schedul
// passes over schedule's records) and the key prefix, as written, or an
// escape that may spell them otherwise (escaped). Readers pass over the
// records it rejects without decoding them: --rule note_failed decoded
// every one of 100,000 records.
func (f Filter) Raw() func([]byte) bool {
	var texts [][]byte
	if f.Rule != "" {
		texts = append(texts, []byte(`"`+f.Rule+`"`))
	}
	if f.KeyPrefix != "" {
		texts = append(texts, []byte(f.KeyPrefix))
	}
	if len(texts) == 0 {
		return nil
	}
	return func(b []byte) bool {
		for _, t := range texts {
			if !bytes.Contains(b, t) {
				return escaped(b)
			}
		}
		return true
	}
}

// Decode parses an event/ fact.
func Decode(f facts.Fact) (Event, error) {
	e := Event{ID: strings.TrimPrefix(f.Key, "event/"), Rev: f.ModRevision}
	if err := json.Unmarshal(f.Value, &e.EventRecord); err != nil {
		return e, fmt.Errorf("event %s: %w", f.Key, err)
	}
	return e, nil
}

// List returns the records passing the filter, oldest first, and the
// revision it read at. A record that does not parse is skipped and counted
// in bad, not fatal: an auditor still sees the rest.
func List(ctx context.Context, s *facts.Store, flt Filter) (evs []Event, rev int64, bad int, err error) {
	prefix := "event/"
	all, rev, err := s.List(ctx, prefix, 0)
	if err != nil {
		return nil, 0, 0, err
	}
	raw := flt.Raw()
	for _, f := range all {
		if !flt.Since.IsZero() {
			if t, ok := facts.EventTime(strings.TrimPrefix(f.Key, prefix)); ok && t.Before(flt.Since) {
				continue
			}
		}
		if raw != nil && !raw(f.Value) {
			continue
		}
		e, err := Decode(f)
		if err != nil {
			bad++
			continue
		}
		if flt.Match(e) {
			evs = append(evs, e)
		}
	}
	return evs, rev, bad, nil
}

// RuleNames returns the names of the rules, and the other writers (apply,
// an agent's report), the records carry, each once, sorted. Records are
// read newest first a page at a time, and of each only its rule decoded.
func RuleNames(ctx context.Context, s *facts.Store) ([]string, error) {
	seen := map[string]bool{}
	_, err := s.Backward(ctx, "event/", 0, newestPage, func(f facts.Fact) bool {
		if rule := ruleOf(f.Value); rule != "" {
			seen[rule] = true
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// ruleOf is a record's rule name, as Decode reads it. The records
// CCattler writes begin with it ({"rule":"schedule",...: EventRecord's
// first field) and name no other "rule": read from there; any other record
// is decoded (a hand-written one may give the field twice, and decoding
// takes the last), as a skipping decode of 100,000 records of about a
// kilobyte took 6 s.
func ruleOf(b []byte) string {
	const head = `{"rule":"`
	if rest, ok := bytes.CutPrefix(b, []byte(head)); ok && bytes.Count(b, []byte(`"rule"`)) == 1 {
		if i := bytes.IndexAny(rest, `"\`); i >= 0 && rest[i] == '"' {
			return string(rest[:i])
		}
	}
	var r struct {
		Rule string `json:"rule"`
	}
	if json.Unmarshal(b, &r) != nil {
		return ""
	}
	return r.Rule
}

// Follow calls fn for every new record passing the filter, committed after
// revision rev, until ctx is done (it then returns ctx.Err()) or the watch fails.
func Follow(ctx context.Context, s *facts.Store, flt Filter, rev int64, fn func(Event)) error {
	wc := s.WatchChanges(ctx, "event/", rev+1)
	for resp := range wc {
		if err := resp.Err; err != nil {
			return fmt.Errorf("follow events: %w", err)
		}
		for _, c := range resp.Changes {
			if c.Deleted || c.CreateRevision != c.ModRevision {
				continue // records are written once; updates and deletes are retention
			}
			e, err := Decode(facts.Fact{Key: c.Key, Value: c.Value, ModRevision: c.ModRevision})
			if err != nil {
				continue
			}
			if flt.Match(e) {
				fn(e)
			}
		}
	}
	return ctx.Err()
}

// atRevision returns the records committed at revision rev.
func atRevision(ctx context.Context, s *facts.Store, rev int64) ([]Event, error) {
	fs, err := s.ModifiedAt(ctx, "event/", rev)
	if err != nil {
		return nil, fmt.Errorf("records at revision %d: %w", rev, err)
	}
	var out []Event
	for _, f := range fs {
		e, err := Decode(facts.Fact{Key: f.Key, Value: f.Value, ModRevision: f.ModRevision})
		if err == nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// oldestRecordRev is the ModRevision of the oldest retained record (0: none).
func oldestRecordRev(ctx context.Context, s *facts.Store) (int64, error) {
	oldest, ok, _, err := s.First(ctx, "event/")
	if err != nil || !ok {
		return 0, err
	}
	return oldest.ModRevision, nil
}
