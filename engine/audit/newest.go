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
// of keys, names and ids, so a record that names one contains it; one
// that holds an escape that may spell them otherwise (escaped) passes too.
func Mentions(texts ...string) func([]byte) bool {
	return func(b []byte) bool {
		for _, t := range texts {
			if bytes.Contains(b, []byte(t)) {
				return true
			}
		}
		return escaped(b)
	}
}

// escaped reports whether a record's bytes hold a backslash: a JSON
// escape, which may spell a name, an id or a key otherwise ("\u0077eb" is
// "web", "\/" a slash). A record without one holds every string it
// decodes to as written. encoding/json writes none for the records'
// names, ids and keys (none were found in the 102,031 records of a large
// bench), but a record is a user's to write (docs/security.md): one with
// escapes is decoded and looked at rather than passed over by a test of
// its text.
func escaped(b []byte) bool { return bytes.IndexByte(b, '\\') >= 0 }

// MentionsName is a Query.Raw test for many names at once: the record's
// stored bytes hold one of names as a whole word, a run of lowercase
// letters, digits and '-' (what service, node and volume names and
// instance ids are made of: facts.CheckSegment) between two bytes of
// none of those. A key segment, a binding's value and a written value
// naming one are such words; "web" in "webapp" is not. One pass over the
// bytes with a set lookup per word, where Mentions searches the bytes
// once per text: describe of a service of 10,000 instances decoded every
// record instead.
func MentionsName(names ...string) func([]byte) bool {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return func(b []byte) bool {
		for i := 0; i < len(b); {
			if !nameByte(b[i]) {
				i++
				continue
			}
			j := i + 1
			for j < len(b) && nameByte(b[j]) {
				j++
			}
			if _, ok := set[string(b[i:j])]; ok {
				return true
			}
			i = j
		}
		return escaped(b)
	}
}

// nameByte reports whether c may be part of a name or an instance id.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-'
}
