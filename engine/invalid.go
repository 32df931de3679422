package engine

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts"
)

// KindInvalid is the Kind of a record of a fact that breaks the schema: a
// bad value past apply, a key of no valid form, a lease key on no etcd
// lease. Rules treat such a fact as absent; the record says so once.
const KindInvalid = "invalid"

// maxInvalidValue bounds the bytes of an invalid value a record and the log
// repeat: a 5 MB value is named, not copied.
const maxInvalidValue = 256

// invalidMemory remembers, for one term, the revision at which each invalid
// fact was recorded, so that a fact is recorded once and again only when it
// changes. It is bounded like the rejection memory.
type invalidMemory map[string]int64

// recordInvalid writes one record (KindInvalid) for each fact in fs that
// breaks the schema and was not recorded at its revision this term, and logs
// it: key, value (truncated) and why. Like rejection records they explain
// and change nothing: a failure to write them is logged and retried when
// the fact is seen again, and only the loss of leadership ends the term.
func (e *Engine) recordInvalid(ctx context.Context, t *term, fs []facts.Fact, version string, seen invalidMemory) error {
	var ops []facts.Op
	var keys []string
	for _, f := range fs {
		if f.Invalid == "" || seen[f.Key] == f.ModRevision {
			continue
		}
		value := truncateValue(f.Value)
		e.log.Warn("engine: invalid fact; rules treat it as absent", "key", f.Key, "value", value, "reason", f.Invalid)
		id, at := e.ids.Next()
		rec, err := json.Marshal(facts.EventRecord{Rule: "schema", Version: version, Kind: KindInvalid,
			Bindings: map[string]string{"key": f.Key, "value": value},
			Reads:    []facts.EventRead{{Key: f.Key, Rev: f.ModRevision}},
			Time:     at.Format(timeLayout), Leader: e.cfg.Identity, Message: f.Invalid})
		if err != nil {
			return err
		}
		ops = append(ops, facts.Put(facts.Event(id), rec))
		keys = append(keys, f.Key)
	}
	if len(ops) == 0 {
		return nil
	}
	if ok, err := e.writeRecords(ctx, t, ops, "records of invalid facts; they are written again when the fact next changes or the term restarts"); err != nil || !ok {
		return err
	}
	if len(seen) > maxRejectionMemory {
		clear(seen)
	}
	revs := map[string]int64{}
	for _, f := range fs {
		revs[f.Key] = f.ModRevision
	}
	for _, k := range keys {
		seen[k] = revs[k]
	}
	e.m.update(func(s *Stats) { s.InvalidRecords += int64(len(keys)) })
	return nil
}

// invalidOf returns the changed facts that break the schema (deletes aside).
func invalidOf(changes []facts.Change) []facts.Fact {
	var out []facts.Fact
	for _, c := range changes {
		if !c.Deleted && c.Invalid != "" {
			out = append(out, c.Fact)
		}
	}
	return out
}

// truncateValue shows at most maxInvalidValue bytes of a value, cut at a
// rune boundary, as text.
func truncateValue(v []byte) string {
	if len(v) <= maxInvalidValue {
		return string(v)
	}
	n := maxInvalidValue
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return string(v[:n]) + "…"
}
