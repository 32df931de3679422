package spec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/hashicorp/hcl/v2"
)

// ErrNotFound is returned (wrapped) by Delete for a name that has no facts.
var ErrNotFound = errors.New("not found")

// Op says what a Change does to a key.
type Op string

const (
	OpPut    Op = "+" // the key is new
	OpChange Op = "~" // the key exists with another value
	OpDelete Op = "-" // the key goes away
)

// Change is one difference between the files and the store.
type Change struct {
	Op  Op
	Key string
	Old []byte // nil for a put
	New []byte // nil for a delete
}

// String renders the change as the CLI prints it:
// "+ key = value", "~ key = old -> new", "- key (was value)".
// Values are shortened: one written straight to etcd may be megabytes, or
// hold characters that reorder the terminal's line.
func (c Change) String() string {
	const n = 200
	key := facts.Shorten([]byte(c.Key), n) // a key written past apply is unchecked too
	switch c.Op {
	case OpPut:
		return fmt.Sprintf("+ %s = %s", key, facts.Shorten(c.New, n))
	case OpChange:
		return fmt.Sprintf("~ %s = %s -> %s", key, facts.Shorten(c.Old, n), facts.Shorten(c.New, n))
	}
	return fmt.Sprintf("- %s (was %s)", key, facts.Shorten(c.Old, n))
}

// Options tune Apply and Delete.
type Options struct {
	DryRun bool // compute the difference, write nothing
	// Attempts bounds the read-diff-commit rounds when a concurrent writer
	// changes a guarded key in between; default 5.
	Attempts int
	// Actor names who applied, in the apply's record under event/ (default "user").
	Actor string
	// IgnoreNotFound lets a delete pass over the names that have no facts
	// instead of deleting nothing.
	IgnoreNotFound bool

	volumes  []volumeRef // Apply: volumes the store must declare
	deleting []Ref       // Delete: every one must have facts; a volume is refused while a service not deleted with it names it
}

// eventIDs numbers the records of this process's applies.
var eventIDs = facts.NewEventIDs()

// record is the apply's entry under event/, committed with its writes, so
// that `ccattler why` ends a chain at the user's apply.
func record(changes []Change, actor string) (facts.Op, error) {
	if actor == "" {
		actor = "user"
	}
	id, at := eventIDs.Next()
	rec := facts.EventRecord{Rule: "apply", Kind: "apply", Leader: actor, Time: at.Format(time.RFC3339Nano)}
	for _, c := range changes {
		if c.Op == OpDelete {
			rec.Writes = append(rec.Writes, facts.EventWrite{Key: c.Key, Deleted: true})
		} else {
			rec.Writes = append(rec.Writes, facts.EventWrite{Key: c.Key, Value: facts.RawJSON(c.New)})
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return facts.Op{}, fmt.Errorf("encode the apply's record: %w", err)
	}
	return facts.Put(facts.Event(id), b), nil
}

// Result is what Apply or Delete did, or would do under DryRun.
type Result struct {
	Changes []Change // sorted by key; empty when the store already matched
	// Rev is the revision of the write, or the revision read when nothing
	// was written (no changes, or DryRun).
	Rev     int64
	Written bool
	// HistoryDenied: the writes were made, but the principal may not write
	// desired/history/ (its grants are narrower than a user's default), so
	// no history entry was.
	HistoryDenied bool
}

// Apply makes the store hold exactly the facts of doc for every service and
// volume doc names: missing facts are put, different ones overwritten, and
// facts of attributes no longer in the file deleted. All writes go in one
// transaction guarded by the ModRevision of every key it read, so a
// concurrent change makes the round start over rather than be overwritten
// blindly. Objects not named in doc are left alone.
//
// A service that names a volume neither doc nor the store declares is
// refused with a *RefusedError (nothing is written); the volume's absence
// or presence guards the transaction like every key read.
func Apply(ctx context.Context, s *facts.Store, doc *Doc, opts Options) (Result, error) {
	want := map[string][]byte{}
	var scopes []scope
	declared := map[string]bool{}
	for _, o := range doc.Objects {
		scopes = append(scopes, scopeOf(o.Kind, o.Name))
		for _, f := range o.Facts {
			want[f.Key] = f.Value
		}
		if o.Kind == KindVolume {
			declared[o.Name] = true
		}
	}
	var refs []volumeRef
	for _, o := range doc.Objects {
		if raw, ok := want[facts.ServiceVolume(o.Name)]; ok && o.Kind == KindService {
			if v, ok := facts.StringValue(raw); ok && !declared[v] {
				refs = append(refs, volumeRef{service: o.Name, volume: v, at: o.VolumeRange})
			}
		}
	}
	opts.volumes = refs
	return reconcile(ctx, s, scopes, want, opts)
}

// volumeRef is a service's volume that the applied files do not declare:
// the store must.
type volumeRef struct {
	service, volume string
	at              hcl.Range
}

// RefusedError is an apply or delete the rules of the schema refuse, with
// a diagnostic per reason (positions in the files when there are files).
type RefusedError struct{ Diags hcl.Diagnostics }

func (e *RefusedError) Error() string {
	var parts []string
	for _, d := range e.Diags {
		parts = append(parts, DiagString(d))
	}
	return strings.Join(parts, "; ")
}

// Ref names one service or volume.
type Ref struct {
	Kind Kind
	Name string
}

func (r Ref) String() string { return string(r.Kind) + " " + r.Name }

// Delete is DeleteAll of one service or volume.
func Delete(ctx context.Context, s *facts.Store, kind Kind, name string, opts Options) (Result, error) {
	return DeleteAll(ctx, s, []Ref{{kind, name}}, opts)
}

// DeleteAll removes every desired fact of the services and volumes named,
// and each service's user intent, in one transaction. A name with no facts
// is ErrNotFound, and a volume that a service not deleted with it still
// names is refused (RefusedError): then nothing is deleted.
func DeleteAll(ctx context.Context, s *facts.Store, refs []Ref, opts Options) (Result, error) {
	if len(refs) == 0 {
		return Result{}, errors.New("delete: nothing named")
	}
	var scopes []scope
	for _, r := range refs {
		if r.Kind != KindService && r.Kind != KindVolume {
			return Result{}, fmt.Errorf("remove %s %q: expected kind service or volume", r.Kind, r.Name)
		}
		if err := facts.CheckSegment("name", r.Name); err != nil {
			return Result{}, fmt.Errorf("remove %s: %w", r.Kind, err)
		}
		scopes = append(scopes, scopeOf(r.Kind, r.Name))
	}
	opts.deleting = refs
	return reconcile(ctx, s, scopes, nil, opts)
}

// missing returns an ErrNotFound error naming the deleted objects that
// have no facts in have, or nil when every one has some.
func missing(refs []Ref, have map[string]facts.Fact) error {
	found := map[string]bool{} // by scope base: owns a key of have
	for k := range have {
		switch parts := strings.SplitN(k, "/", 5); {
		case len(parts) >= 3 && parts[0] == "desired":
			found[strings.Join(parts[:3], "/")] = true
		case len(parts) >= 4 && parts[0] == "intent":
			found["desired/service/"+parts[3]] = true // intent/user/service/NAME/instances
		}
	}
	var gone []string
	for _, r := range refs {
		if sc := scopeOf(r.Kind, r.Name); !found[sc.base] {
			gone = append(gone, fmt.Sprintf("%s %q %s: nothing under %s", r.Kind, r.Name, ErrNotFound, sc.base))
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return fmt.Errorf("%s%w", strings.Join(gone, "; "), notFound{})
}

// notFound makes an error wrap ErrNotFound without repeating its text.
type notFound struct{}

func (notFound) Error() string { return "" }
func (notFound) Unwrap() error { return ErrNotFound }

// refuse checks, at revision rev, what the schema requires beyond the
// values themselves: every volume a service names is declared, and a volume
// being deleted is named by no service. It returns the conditions that keep
// the answer true until the commit.
func refuse(ctx context.Context, s *facts.Store, rev int64, opts Options) ([]facts.Cond, error) {
	var guards []facts.Cond
	var diags hcl.Diagnostics
	for _, r := range opts.volumes {
		key := facts.DesiredVolume(r.volume)
		fs, _, err := s.List(ctx, key, rev)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", key, err)
		}
		i := slices.IndexFunc(fs, func(f facts.Fact) bool { return f.Key == key })
		if i < 0 {
			at := r.at
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Undeclared volume",
				Detail:  fmt.Sprintf("Service %q names volume %q, which is not declared: add a volume %q block to the files applied, or apply it first.", r.service, r.volume, r.volume),
				Subject: &at})
			continue
		}
		guards = append(guards, facts.Cond{Key: key, Rev: fs[i].ModRevision})
	}
	volumes, services := map[string]bool{}, map[string]bool{}
	for _, r := range opts.deleting {
		if r.Kind == KindVolume {
			volumes[r.Name] = true
		} else {
			services[r.Name] = true
		}
	}
	if len(volumes) > 0 {
		fs, _, err := s.List(ctx, "desired/service/", rev)
		if err != nil {
			return nil, fmt.Errorf("read desired/service/: %w", err)
		}
		for _, f := range fs {
			if !strings.HasSuffix(f.Key, "/volume") {
				continue
			}
			svc := strings.TrimSuffix(strings.TrimPrefix(f.Key, "desired/service/"), "/volume")
			if v, ok := facts.StringValue(f.Value); ok && volumes[v] && !services[svc] {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Volume in use",
					Detail: fmt.Sprintf("Volume %q is used by service %q (%s): delete that service too, or change its volume first.", v, svc, f.Key)})
				continue
			}
			guards = append(guards, facts.Cond{Key: f.Key, Rev: f.ModRevision})
		}
	}
	if len(diags) > 0 {
		return nil, &RefusedError{Diags: diags}
	}
	return guards, nil
}

// scope is the set of keys one object owns: its desired key, everything
// below it, and (for a service) the user's intent.
type scope struct {
	base   string
	intent string // "" for a volume
}

func scopeOf(kind Kind, name string) scope {
	sc := scope{base: "desired/" + string(kind) + "/" + name}
	if kind == KindService {
		sc.intent = facts.Intent("user", name)
	}
	return sc
}

func (sc scope) owns(key string) bool {
	return key == sc.base || strings.HasPrefix(key, sc.base+"/") || (sc.intent != "" && key == sc.intent)
}

func reconcile(ctx context.Context, s *facts.Store, scopes []scope, want map[string][]byte, opts Options) (Result, error) {
	attempts := opts.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	verb := "apply"
	if opts.deleting != nil {
		verb = "delete"
	}
	var err error
	for range attempts {
		var have map[string]facts.Fact
		var rev int64
		have, rev, err = read(ctx, s, scopes)
		if err != nil {
			return Result{}, err
		}
		if err := missing(opts.deleting, have); err != nil && !opts.IgnoreNotFound {
			return Result{Rev: rev}, err
		}
		guards, err := refuse(ctx, s, rev, opts)
		if err != nil {
			return Result{}, err
		}
		res := Result{Changes: diff(have, want), Rev: rev}
		if opts.DryRun || len(res.Changes) == 0 {
			return res, nil
		}
		t := txnOf(res.Changes, have)
		t.If = append(t.If, guards...)
		rec, err := record(res.Changes, opts.Actor)
		if err != nil {
			return Result{}, err
		}
		t.If = append(t.If, facts.Cond{Key: rec.Key, Rev: 0})
		t.Ops = append(t.Ops, rec)
		hist, err := historyOps(ctx, s, rev, scopes, want, res.Changes, strings.TrimPrefix(rec.Key, "event/"))
		if err != nil {
			return Result{}, err
		}
		t.Ops = append(t.Ops, hist...)
		res.Rev, err = s.Commit(ctx, t)
		if err != nil && len(hist) > 0 && access.IsDenied(err) {
			// A principal granted its services' keys but not their
			// history still applies; the rollback point is what is lost.
			t.Ops = t.Ops[:len(t.Ops)-len(hist)]
			res.Rev, err = s.Commit(ctx, t)
			res.HistoryDenied = err == nil
		}
		if err == nil {
			res.Written = true
			return res, nil
		}
		if !errors.Is(err, facts.ErrConflict) {
			return Result{}, fmt.Errorf("%s %d changes: %w", verb, len(res.Changes), err)
		}
	}
	return Result{}, fmt.Errorf("%s: the keys kept changing under %d attempts; try again: %w", verb, attempts, err)
}

// read lists every key the scopes own, all at one revision.
func read(ctx context.Context, s *facts.Store, scopes []scope) (map[string]facts.Fact, int64, error) {
	have := map[string]facts.Fact{}
	var rev int64
	for _, sc := range scopes {
		for _, prefix := range []string{sc.base, sc.intent} {
			if prefix == "" {
				continue
			}
			fs, r, err := s.List(ctx, prefix, rev)
			if err != nil {
				return nil, 0, fmt.Errorf("read %s: %w", prefix, err)
			}
			rev = r
			for _, f := range fs {
				if sc.owns(f.Key) {
					have[f.Key] = f
				}
			}
		}
	}
	return have, rev, nil
}

func diff(have map[string]facts.Fact, want map[string][]byte) []Change {
	var out []Change
	for k, v := range want {
		old, ok := have[k]
		switch {
		case !ok:
			out = append(out, Change{Op: OpPut, Key: k, New: v})
		case !bytes.Equal(old.Value, v):
			out = append(out, Change{Op: OpChange, Key: k, Old: old.Value, New: v})
		}
	}
	for k, f := range have {
		if _, ok := want[k]; !ok {
			out = append(out, Change{Op: OpDelete, Key: k, Old: f.Value})
		}
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// txnOf guards the writes by every key that was read (its ModRevision) and
// every key that was absent (revision 0), so that the transaction applies
// only to the state the diff was computed from.
func txnOf(changes []Change, have map[string]facts.Fact) facts.Txn {
	var t facts.Txn
	keys := make([]string, 0, len(have))
	for k := range have {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.If = append(t.If, facts.Cond{Key: k, Rev: have[k].ModRevision})
	}
	for _, c := range changes {
		if c.Op == OpPut {
			t.If = append(t.If, facts.Cond{Key: c.Key, Rev: 0})
			t.Ops = append(t.Ops, facts.Put(c.Key, c.New))
		} else if c.Op == OpChange {
			t.Ops = append(t.Ops, facts.Put(c.Key, c.New))
		} else {
			t.Ops = append(t.Ops, facts.Delete(c.Key))
		}
	}
	return t
}
