package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
)

// Firing records are facts.EventRecord values under event/{id}; ids come
// from a facts.EventIDs: timestamps strictly increase within a process, and
// each term seeds the generator from the newest record in etcd (catchUp), so
// ids sort in commit order even when clocks differ a little between servers.
// The sequence starts from the clock, so two processes that pick the same
// nanosecond still differ; the first record of every transaction is also
// guarded with "must be absent".

// timeLayout is how a record's "time" is written.
const timeLayout = time.RFC3339Nano

// encodeRecord renders the firing's record. ownRev gives the revision at
// which an earlier transaction of the plan wrote a key (absent: this one,
// recorded as Rev 0 with Own set).
func encodeRecord(f *eval.Firing, version, leader string, at time.Time, ownRev map[string]int64) ([]byte, error) {
	r := facts.EventRecord{Rule: f.Rule, Version: version, Kind: f.Kind, Bindings: f.Bindings,
		Time: at.Format(timeLayout), Leader: leader,
		Reads: make([]facts.EventRead, 0, len(f.Reads)), Writes: make([]facts.EventWrite, 0, len(f.Writes))}
	if r.Bindings == nil {
		r.Bindings = map[string]string{}
	}
	for _, rd := range f.Reads {
		er := facts.EventRead{Key: rd.Key, Rev: rd.Rev, Own: rd.Own}
		if rd.Own {
			er.Rev = ownRev[rd.Key]
		}
		r.Reads = append(r.Reads, er)
	}
	for _, w := range f.Writes {
		if w.Value == nil {
			r.Writes = append(r.Writes, facts.EventWrite{Key: w.Key, Deleted: true})
		} else {
			r.Writes = append(r.Writes, facts.EventWrite{Key: w.Key, Value: facts.RawJSON(w.Value)})
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode firing record of rule %s: %w", f.Rule, err)
	}
	return b, nil
}
