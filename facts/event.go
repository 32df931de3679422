package facts

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// EventRecord is the value of event/{id}: why some writes happened. The
// engine writes one per rule firing; `ccattler apply` one per apply; agents
// one per notable thing (a container that exited). A record is committed in
// the same transaction as the writes it explains, so its ModRevision is theirs.
type EventRecord struct {
	Rule     string            `json:"rule"`              // rule name, or "apply", "agent", "reload", ...
	Version  string            `json:"version,omitempty"` // rule-set version hash
	Kind     string            `json:"kind,omitempty"`    // derive | emit | apply | report | ...
	Bindings map[string]string `json:"bindings,omitempty"`
	Reads    []EventRead       `json:"reads,omitempty"`
	Writes   []EventWrite      `json:"writes,omitempty"`
	Time     string            `json:"time"`
	Leader   string            `json:"leader,omitempty"` // the writer: server id, "user", "agent/node-1"
	Message  string            `json:"message,omitempty"`
	// Rejected lists, for a choice that placed nothing (Kind "rejection"),
	// every candidate and every filter it failed.
	Rejected []EventRejection `json:"rejected,omitempty"`
}

// EventRejection is one candidate a choice passed over and why.
type EventRejection struct {
	Candidate map[string]string `json:"candidate"`
	Filters   []string          `json:"filters"`
}

// EventRead is a fact a firing read. Rev is its ModRevision when read (0: it
// was absent). Own marks a value written earlier in the same plan: Rev is then
// the revision that write committed at, or 0 when it committed in the same
// transaction as this record.
type EventRead struct {
	Key string `json:"key"`
	Rev int64  `json:"rev"`
	Own bool   `json:"own,omitempty"`
}

// EventWrite is one put (Value) or delete (Deleted).
type EventWrite struct {
	Key     string  `json:"key"`
	Value   RawJSON `json:"value,omitempty"`
	Deleted bool    `json:"deleted,omitempty"`
}

// RawJSON is a JSON value kept as its text.
type RawJSON []byte

func (r RawJSON) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

func (r *RawJSON) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

// eventIDLayout formats the timestamp half of an event id: UTC with
// nanoseconds, so that ids sort in time order as strings.
const eventIDLayout = "20060102T150405.000000000Z"

// EventIDs hands out event ids {timestamp}-{sequence}. Timestamps strictly
// increase within a process; Seed makes later ids sort after one seen in etcd.
// Writers still guard each record with "must be absent", so an id is never reused.
type EventIDs struct {
	mu   sync.Mutex // guards last and seq
	last time.Time
	seq  uint64
}

// NewEventIDs returns a generator whose sequence starts from the clock, so
// that two processes picking the same nanosecond still differ.
func NewEventIDs() *EventIDs {
	return &EventIDs{seq: uint64(time.Now().UnixNano()/1000) % 1000000}
}

// Next returns a fresh id and the time it stands for.
func (g *EventIDs) Next() (string, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now().UTC()
	if !now.After(g.last) {
		now = g.last.Add(time.Nanosecond)
	}
	g.last = now
	g.seq = (g.seq + 1) % 1000000
	return fmt.Sprintf("%s-%06d", now.Format(eventIDLayout), g.seq), now
}

// Seed makes every later id sort after id.
func (g *EventIDs) Seed(id string) {
	t, ok := EventTime(id)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.After(g.last) {
		g.last = t
	}
}

// EventTime parses the timestamp of an event id.
func EventTime(id string) (time.Time, bool) {
	ts, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(eventIDLayout, ts)
	return t, err == nil
}
