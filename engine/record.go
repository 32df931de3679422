package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
)

// idLayout formats the timestamp half of an event id: UTC, nanoseconds, so
// that ids sort in time order as strings.
const idLayout = "20060102T150405.000000000Z"

// idGen hands out event ids {timestamp}-{sequence}. Timestamps strictly
// increase within a process, and a new leader seeds from the newest id in
// etcd, so ids sort in commit order even when clocks differ a little between
// servers. The sequence starts at a value taken from the clock, so two
// processes that somehow pick the same nanosecond still differ; the committer
// also guards every record with "must be absent", so an id is never reused.
type idGen struct {
	mu   sync.Mutex // guards last and seq
	last time.Time
	seq  uint64
}

func newIDGen() *idGen {
	return &idGen{seq: uint64(time.Now().UnixNano()/1000) % 1000000}
}

// next returns a fresh id and the time it stands for.
func (g *idGen) next() (string, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now().UTC()
	if !now.After(g.last) {
		now = g.last.Add(time.Nanosecond)
	}
	g.last = now
	g.seq = (g.seq + 1) % 1000000
	return fmt.Sprintf("%s-%06d", now.Format(idLayout), g.seq), now
}

// seed makes every later id sort after id (the newest record in etcd).
func (g *idGen) seed(id string) {
	t, ok := eventTime(id)
	if !ok {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if t.After(g.last) {
		g.last = t
	}
}

// eventTime parses the timestamp of an event id.
func eventTime(id string) (time.Time, bool) {
	ts, _, ok := strings.Cut(id, "-")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(idLayout, ts)
	return t, err == nil
}

// Record is the value of event/{id}: one firing, committed in the same
// transaction as the writes it explains.
type Record struct {
	Rule     string            `json:"rule"`
	Version  string            `json:"version"`
	Kind     string            `json:"kind"`
	Bindings map[string]string `json:"bindings"`
	Reads    []RecordRead      `json:"reads"`
	Writes   []RecordWrite     `json:"writes"`
	Time     string            `json:"time"`
	Leader   string            `json:"leader"`
}

// RecordRead is a fact the firing read. Rev is its ModRevision when read (0:
// it was absent). Own marks a value written earlier in the same plan: Rev is
// then the revision that write committed at, or 0 when it committed in the
// same transaction as this record (the record's own ModRevision).
type RecordRead struct {
	Key string `json:"key"`
	Rev int64  `json:"rev"`
	Own bool   `json:"own,omitempty"`
}

// RecordWrite is one put (Value) or delete (Deleted) of the firing.
type RecordWrite struct {
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value,omitempty"`
	Deleted bool            `json:"deleted,omitempty"`
}

// encodeRecord renders the firing's record. ownRev gives the revision at
// which an earlier transaction of the plan wrote a key (absent: this one).
func encodeRecord(f *eval.Firing, version, leader string, at time.Time, ownRev map[string]int64) ([]byte, error) {
	r := Record{Rule: f.Rule, Version: version, Kind: f.Kind, Bindings: f.Bindings,
		Time: at.Format(time.RFC3339Nano), Leader: leader,
		Reads: make([]RecordRead, 0, len(f.Reads)), Writes: make([]RecordWrite, 0, len(f.Writes))}
	if r.Bindings == nil {
		r.Bindings = map[string]string{}
	}
	for _, rd := range f.Reads {
		rr := RecordRead{Key: rd.Key, Rev: rd.Rev, Own: rd.Own}
		if rd.Own {
			rr.Rev = ownRev[rd.Key]
		}
		r.Reads = append(r.Reads, rr)
	}
	for _, w := range f.Writes {
		if w.Value == nil {
			r.Writes = append(r.Writes, RecordWrite{Key: w.Key, Deleted: true})
		} else {
			r.Writes = append(r.Writes, RecordWrite{Key: w.Key, Value: w.Value})
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode firing record of rule %s: %w", f.Rule, err)
	}
	return b, nil
}
