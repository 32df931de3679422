package audit

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// newestPage is how many records Newest reads from etcd at a time.
const newestPage = 1000

// Query bounds a backward read of the records.
type Query struct {
	Since time.Time // stop at the first record older than this (zero: none)
	// Raw, when set, is a cheap first test of a record's stored bytes
	// (such as the text of a key it must name): a record it rejects is
	// not decoded, and not passed on.
	Raw func([]byte) bool
	// Limit is the most records read (0: no limit).
	Limit int
}

// Newest visits the records newest first until fn returns false, the
// records run out, one older than q.Since is reached or q.Limit records are
// read. Record ids begin with their time, so it reads backwards in pages
// of keys, every page at the revision of the first: one consistent view,
// and a reader of the latest few never loads the whole log. It returns the
// revision read at and how many records it read; a record that does not
// parse is skipped and counted in bad.
func Newest(ctx context.Context, s *facts.Store, q Query, fn func(Event) bool) (rev int64, read, bad int, err error) {
	rev, err = s.Backward(ctx, "event/", 0, newestPage, func(f facts.Fact) bool {
		if q.Limit > 0 && read >= q.Limit {
			return false
		}
		if !q.Since.IsZero() {
			if t, ok := facts.EventTime(strings.TrimPrefix(f.Key, "event/")); ok && t.Before(q.Since) {
				return false
			}
		}
		read++
		if q.Raw != nil && !q.Raw(f.Value) {
			return true
		}
		e, err := Decode(facts.Fact{Key: f.Key, Value: f.Value, ModRevision: f.ModRevision})
		if err != nil {
			bad++
			return true
		}
		return fn(e)
	})
	if err != nil {
		return rev, read, bad, fmt.Errorf("read records: %w", err)
	}
	return rev, read, bad, nil
}

// Mentions is a Query.Raw test: the record's stored bytes contain one of
// the texts. JSON as the project writes it escapes none of the characters
// of keys, names and ids, so a record that names one contains it.
func Mentions(texts ...string) func([]byte) bool {
	return func(b []byte) bool {
		for _, t := range texts {
			if bytes.Contains(b, []byte(t)) {
				return true
			}
		}
		return false
	}
}
