package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ccattler/ccattler/engine/eval"
	"github.com/ccattler/ccattler/facts"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// errLostLeadership ends a term: the leader key is gone, so every further
// transaction of this term would fail its guard anyway.
var errLostLeadership = errors.New("engine: lost leadership")

// staged is a firing on its way to etcd. Its event id is fixed when it is
// staged, so every attempt writes the same record key: after an attempt
// whose answer never came, the record being there says it committed.
type staged struct {
	f     eval.Firing
	id    string
	at    time.Time
	bytes int // keys and values of the writes, plus an estimate of the record
	seq   int // position in its plan, for Firing.AfterAll
}

// planRun is the state of committing one plan.
type planRun struct {
	version string
	ownRev  map[string]int64 // key -> revision at which this plan wrote it
	lastRev int64            // revision of the plan's latest commit
	// lost is the plan position of the earliest firing that will not
	// commit (dropped as stale or orphaned, refused), math.MaxInt while
	// none: a firing marked AfterAll behind it does not commit either.
	lost int
}

// drop notes that the firing st of the plan will not commit.
func (run *planRun) drop(st *staged) { run.lost = min(run.lost, st.seq) }

func (run *planRun) committed(chunk []*staged, rev int64) {
	for _, st := range chunk {
		for _, w := range st.f.Writes {
			run.ownRev[w.Key] = rev
		}
	}
	run.lastRev = max(run.lastRev, rev)
}

// stage gives each firing its event id and sets aside those that can never
// commit (a value the schema rejects, a key written twice, more writes than
// one transaction holds), reporting each by rule name.
func (e *Engine) stage(run *planRun, fs []eval.Firing, version string) []*staged {
	out := make([]*staged, 0, len(fs))
	run.lost = math.MaxInt // a new plan: positions restart
	for i := range fs {
		f := fs[i]
		if err := e.checkFiring(&f); err != nil {
			e.log.Error("engine: firing cannot be committed; skipped", "rule", f.Rule, "bindings", f.Bindings, "version", version, "err", err)
			e.m.update(func(s *Stats) { s.Rejected++ })
			run.lost = min(run.lost, i)
			continue
		}
		n := 512 + len(e.store.Root)
		for _, w := range f.Writes {
			n += 2*len(w.Key) + 2*len(w.Value) + 2*len(e.store.Root) // the write and its copy in the record
		}
		for _, r := range f.Reads {
			n += len(r.Key) + 24
		}
		if n > e.bytesLimit() {
			e.log.Error("engine: firing cannot be committed; skipped", "rule", f.Rule, "bindings", f.Bindings, "version", version,
				"err", fmt.Sprintf("about %d bytes with its record exceed the transaction limit of %d bytes", n, e.bytesLimit()))
			e.m.update(func(s *Stats) { s.Rejected++ })
			run.lost = min(run.lost, i)
			continue
		}
		id, at := e.ids.Next()
		out = append(out, &staged{f: f, id: id, at: at, bytes: n, seq: i})
	}
	return out
}

func (e *Engine) checkFiring(f *eval.Firing) error {
	if len(f.Writes)+1 > e.opsLimit() {
		return fmt.Errorf("%d writes and its record exceed the transaction limit of %d operations", len(f.Writes), e.opsLimit())
	}
	reads := 0
	for _, r := range f.Reads {
		if guarded(r) {
			reads++
		}
	}
	if reads+2 > e.opsLimit() { // +2: the first record's absence, the leader key
		return fmt.Errorf("%d reads exceed the transaction limit of %d compares", reads, e.opsLimit())
	}
	seen := make(map[string]bool, len(f.Writes))
	for _, w := range f.Writes {
		if seen[w.Key] {
			return fmt.Errorf("writes %s twice", w.Key)
		}
		seen[w.Key] = true
		if w.Value == nil {
			if _, err := e.store.Schema.Parse(w.Key); err != nil {
				return err
			}
			continue
		}
		if _, err := e.store.Schema.Validate(w.Key, w.Value); err != nil {
			return err
		}
	}
	return nil
}

// dropOrphans removes the firings that read a value written earlier in the
// plan (Own) whose writer is no longer on its way: dropped as stale, or
// never staged; and those marked AfterAll behind a firing that will not
// commit. It returns the keys whose new values they would have read (for
// AfterAll, every key they read), and those they would have written (see
// dropStale), so that evaluating again reaches their bindings.
func (run *planRun) dropOrphans(pending []*staged) ([]*staged, []string) {
	ahead := map[string]bool{}
	var orphaned []string
	out := pending[:0]
	for _, st := range pending {
		ok := true
		if st.f.AfterAll && st.seq > run.lost {
			ok = false
			for _, r := range st.f.Reads {
				orphaned = append(orphaned, r.Key)
			}
		}
		for _, r := range st.f.Reads {
			if !r.Own || !ok {
				continue
			}
			if _, done := run.ownRev[r.Key]; !done && !ahead[r.Key] {
				ok = false
				orphaned = append(orphaned, r.Key)
			}
		}
		if !ok {
			orphaned = append(orphaned, writtenKeys(st)...)
			run.drop(st)
			continue
		}
		for _, w := range st.f.Writes {
			ahead[w.Key] = true
		}
		out = append(out, st)
	}
	return out, orphaned
}

// chunkLen returns how many firings from the head of pending go into the next
// transaction: as many as fit its operation, compare and byte limits, and
// never two writes of one key (etcd refuses those in one transaction).
func (e *Engine) chunkLen(t *term, pending []*staged) int {
	ops, cmps, size := 0, len(e.guardsFor(t))+1, 0 // +1: the first record must be absent
	written := map[string]bool{}
	conds := map[string]int64{}
	for i, st := range pending {
		o := len(st.f.Writes) + 1
		c := 0
		for _, r := range st.f.Reads {
			if rev, ok := conds[condKey(r)]; guarded(r) && (!ok || rev != r.Rev) {
				c++
			}
		}
		dup := false
		for _, w := range st.f.Writes {
			dup = dup || written[w.Key]
		}
		if i > 0 && (dup || ops+o > e.opsLimit() || cmps+c > e.opsLimit() || size+st.bytes > e.bytesLimit()) {
			return i
		}
		ops, cmps, size = ops+o, cmps+c, size+st.bytes
		for _, w := range st.f.Writes {
			written[w.Key] = true
		}
		for _, r := range st.f.Reads {
			if guarded(r) {
				conds[condKey(r)] = r.Rev
			}
		}
	}
	return len(pending)
}

// commitChunk writes the firings of one chunk and their records in one
// transaction guarded by every fact they read, the leader key, and the
// absence of the chunk's first record: if an earlier attempt whose answer
// was lost did commit, that record is there and this attempt fails instead
// of writing twice. (Record ids strictly increase, from a seed read at the
// start of the term, so the other records of the chunk are new too.)
func (e *Engine) commitChunk(ctx context.Context, t *term, run *planRun, chunk []*staged) (int64, error) {
	txn := facts.Txn{Guard: e.guardsFor(t), Checked: true}
	txn.If = append(txn.If, facts.Cond{Key: facts.Event(chunk[0].id), Rev: 0})
	conds := map[string]int64{}
	for _, st := range chunk {
		for _, r := range st.f.Reads {
			if !guarded(r) {
				continue
			}
			if rev, ok := conds[condKey(r)]; ok && rev == r.Rev {
				continue
			}
			conds[condKey(r)] = r.Rev
			if r.Prefix { // no key under the prefix: every key of the range must be absent
				txn.If = append(txn.If, facts.Cond{Key: r.Key, Rev: 0, Prefix: true})
				continue
			}
			txn.If = append(txn.If, facts.Cond{Key: r.Key, Rev: r.Rev})
		}
		key := facts.Event(st.id)
		for _, w := range st.f.Writes {
			txn.Ops = append(txn.Ops, facts.Op{Key: w.Key, Value: w.Value})
		}
		rec, err := encodeRecord(&st.f, run.version, e.cfg.Identity, st.at, run.ownRev)
		if err != nil {
			return 0, err
		}
		txn.Ops = append(txn.Ops, facts.Put(key, rec))
	}
	if e.beforeCommit != nil {
		e.beforeCommit(chunk)
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, e.cfg.CommitTimeout)
	defer cancel()
	rev, err := e.store.Commit(cctx, txn)
	if err == nil && e.loseAnswer != nil && e.loseAnswer() {
		return 0, errors.New("engine: test: the answer to a committed transaction was lost")
	}
	if err == nil {
		e.m.committed(chunk, rev, time.Since(start))
	}
	return rev, err
}

// apply commits a plan. A failed compare means someone changed a fact a
// firing read: the engine waits until the mirror holds the newer state,
// drops the firings whose reads are stale (and those that read their
// writes), commits the rest, and evaluates the dropped bindings again. The
// attempt count resets whenever a transaction commits; past RetryLimit the
// plan is abandoned and a full evaluation scheduled. While etcd does not
// answer, the same transaction is retried with backoff: its record keys make
// a retry after a lost answer harmless. It returns only on ctx's end or the
// loss of leadership.
func (e *Engine) apply(ctx context.Context, t *term, ev Evaluator, p eval.Plan) error {
	a := e.newApplier(t, p)
	defer func() { e.noteCommitted(a.run.lastRev) }()
	if err := a.commitAll(ctx); err != nil {
		a.report(ev)
		a.unsettle()
		return err
	}
	if err := a.finish(ctx, ev); err != nil {
		a.unsettle()
		return err
	}
	return nil
}

// unsettle hands what the plan left uncommitted when the term ended to the
// next term (resume.go): its pending firings and the keys it had yet to
// evaluate again.
func (a *applier) unsettle() {
	for _, st := range a.pending {
		a.e.unsettle(&st.f)
	}
	a.e.unsettleKeys(a.reeval)
	a.e.unsettleKeys(a.lost)
}

// applier is one plan on its way to etcd. commitAll makes no evaluator
// call, so it may run while the round loop evaluates the next round;
// finish, which evaluates dropped bindings again, runs on the round loop.
type applier struct {
	e       *Engine
	t       *term
	run     *planRun
	pending []*staged
	reeval  map[string]bool // keys to evaluate again: stale reads, orphans, dropped writes
	stuck   int             // conflicts since the last commit
	backoff time.Duration
	// check: look for orphans before the next chunk. Firings leave pending
	// by committing (their writes are then in run.ownRev) or by being
	// dropped; only a drop can orphan a firing that read a write, so
	// orphans are looked for after drops alone: a pass over every pending
	// firing's reads after each chunk made committing a plan of 200,000
	// firings quadratic.
	check bool
	// planned and committed count firings; lost holds the keys of the
	// writes of every firing that did not commit.
	planned, committed int
	lost               map[string]bool
	gaveUp             bool // past RetryLimit: the plan is abandoned
}

func (e *Engine) newApplier(t *term, p eval.Plan) *applier {
	run := &planRun{version: p.RuleSetVersion, ownRev: map[string]int64{}}
	a := &applier{e: e, t: t, run: run, reeval: map[string]bool{}, backoff: e.cfg.BackoffMin, check: true,
		planned: len(p.Firings), lost: map[string]bool{}}
	a.pending = e.stage(run, p.Firings, p.RuleSetVersion)
	if len(a.pending) < len(p.Firings) {
		a.loseAll(p.Firings, a.pending)
	}
	return a
}

// loseAll notes the writes of the firings of fs that stage set aside.
func (a *applier) loseAll(fs []eval.Firing, kept []*staged) {
	k := 0
	for i := range fs {
		if k < len(kept) && kept[k].seq == i {
			k++
			continue
		}
		for _, w := range fs[i].Writes {
			a.lost[w.Key] = true
		}
	}
}

// lose notes that the firings of sts will not commit.
func (a *applier) lose(sts ...*staged) {
	for _, st := range sts {
		for _, w := range st.f.Writes {
			a.lost[w.Key] = true
		}
	}
}

// whole reports whether every firing of the plan committed.
func (a *applier) whole() bool { return a.committed == a.planned && !a.gaveUp }

// report tells the evaluator that firings did not commit: it may keep
// bindings, and one it saw fire may still hold.
func (a *applier) report(ev Evaluator) {
	if a.committed < a.planned {
		ev.Uncommitted()
	}
}

// finish evaluates the bindings of the dropped firings again and commits
// what that plans, until nothing is left to evaluate again.
func (a *applier) finish(ctx context.Context, ev Evaluator) error {
	e := a.e
	defer a.report(ev)
	for !a.gaveUp && len(a.reeval) > 0 {
		if err := e.mirror.WaitRev(ctx, a.run.lastRev); err != nil {
			return err
		}
		reeval := a.reeval
		p2, err := e.evaluate(func(r facts.Reader) eval.Plan { return ev.Incremental(r, changesFor(r, reeval)) })
		if err != nil {
			e.log.Error("engine: evaluating again after a conflict failed", "err", err, "version", a.run.version)
			e.needFull = true
			return nil
		}
		e.noteProblems(p2)
		e.m.update(func(s *Stats) { s.Reevaluated += int64(len(reeval)); s.PlanFirings += int64(len(p2.Firings)) })
		a.reeval = map[string]bool{}
		a.planned += len(p2.Firings)
		a.pending = e.stage(a.run, p2.Firings, a.run.version)
		a.loseAll(p2.Firings, a.pending)
		a.check = true
		if err := a.commitAll(ctx); err != nil {
			return err
		}
	}
	if a.gaveUp {
		e.needFull = true
	}
	return nil
}

// commitAll commits the pending firings, dropping the stale ones and those
// that read their writes, until none is left or the plan is abandoned
// (gaveUp). The keys to evaluate again collect in reeval. It touches no
// state of the round loop but through the metrics, and calls no evaluator.
// It returns only on ctx's end or the loss of leadership.
func (a *applier) commitAll(ctx context.Context) error {
	e, t, run := a.e, a.t, a.run
	for {
		if a.check {
			var orphaned []string
			before := a.pending
			var kept []*staged
			kept, orphaned = run.dropOrphans(append([]*staged(nil), before...))
			a.loseDropped(before, kept)
			a.pending = kept
			for _, k := range orphaned {
				a.reeval[k] = true
			}
			a.check = false
		}
		if len(a.pending) == 0 {
			return nil
		}
		// After a conflict the next transaction is half as large, per
		// conflict in a row: while agents rewrite the facts a plan read,
		// a transaction of 5,000 firings finds one of its reads stale
		// on every attempt, and the plan was given up (a full round,
		// a minute at 100,000 instances). A smaller one commits, and a
		// commit restores the size.
		n := max(1, e.chunkLen(t, a.pending)>>min(a.stuck, 30))
		chunk := a.pending[:n]
		rev, err := e.commitChunk(ctx, t, run, chunk)
		switch {
		case err == nil:
			run.committed(chunk, rev)
			a.pending = a.pending[n:]
			a.committed += n
			a.stuck, a.backoff = 0, e.cfg.BackoffMin
			e.log.Debug("engine: committed", "rev", rev, "firings", n, "rule", chunk[0].f.Rule)
		case errors.Is(err, facts.ErrConflict):
			e.m.update(func(s *Stats) { s.Conflicts++ })
			if lead, lerr := e.stillLeader(ctx, t); lerr == nil && !lead {
				return errLostLeadership
			}
			if err := e.mirror.WaitRev(ctx, rev); err != nil {
				return err
			}
			done, doneRev, err := e.committedBefore(ctx, chunk[0])
			if err != nil {
				// The same transaction again, its ids unchanged: its
				// guard conflicts again if the earlier attempt did
				// commit, and the record is read again then.
				e.log.Warn("engine: cannot read a firing record after a conflict; retrying", "err", err, "retry_in", a.backoff)
				if !facts.Sleep(ctx, a.backoff) {
					return ctx.Err()
				}
				a.backoff = min(a.backoff*2, e.cfg.BackoffMax)
				continue
			}
			var stale []string
			before := a.pending
			var kept []*staged
			if !done {
				e.mirror.View(func(r facts.Reader) {
					for _, st := range chunk {
						if _, taken := r.Get(facts.Event(st.id)); taken {
							st.id, st.at = e.ids.Next()
						}
					}
					kept, stale = dropStale(r, run, append([]*staged(nil), before...))
				})
			}
			a.check = true
			if done {
				e.m.committed(chunk, doneRev, 0)
				run.committed(chunk, doneRev)
				a.pending = a.pending[n:]
				a.committed += n
				a.stuck = 0
				continue
			}
			a.loseDropped(before, kept)
			a.pending = kept
			for _, k := range stale {
				a.reeval[k] = true
			}
			a.stuck++
			e.log.Info("engine: conflict; evaluating stale firings again", "rev", rev, "rule", chunk[0].f.Rule,
				"stale_keys", len(stale), "attempt", a.stuck, "version", run.version)
			if a.stuck > e.cfg.RetryLimit {
				e.log.Error("engine: plan still conflicts after the retry limit; evaluating everything again", "attempts", a.stuck,
					"pending", len(a.pending), "version", run.version)
				e.m.update(func(s *Stats) { s.GaveUp++ })
				a.lose(a.pending...)
				a.gaveUp = true
				return nil
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge):
			if n == 1 {
				e.log.Error("engine: etcd refuses a firing as too large; skipped", "rule", chunk[0].f.Rule,
					"bindings", chunk[0].f.Bindings, "err", err)
				e.m.update(func(s *Stats) { s.Rejected++ })
				run.drop(a.pending[0])
				a.lose(a.pending[0])
				a.pending = a.pending[1:]
				a.check = true
				continue
			}
			e.shrinkLimits(chunk, err)
		default:
			e.m.update(func(s *Stats) { s.Unavailable++ })
			e.log.Warn("engine: commit failed; retrying", "err", err, "firings", n, "retry_in", a.backoff)
			if t.lost() {
				return errLostLeadership
			}
			if !facts.Sleep(ctx, a.backoff) {
				return ctx.Err()
			}
			a.backoff = min(a.backoff*2, e.cfg.BackoffMax)
		}
	}
}

// loseDropped notes the writes of the firings of before that are not in
// kept (a subsequence of it).
func (a *applier) loseDropped(before, kept []*staged) {
	if len(kept) == len(before) {
		return
	}
	k := 0
	for _, st := range before {
		if k < len(kept) && kept[k] == st {
			k++
			continue
		}
		a.lose(st)
	}
}

// committedBefore reports whether an earlier attempt at the chunk st
// begins committed after all (its record is there and ours), and at which
// revision. The mirror keeps a firing record's key, not its value
// (facts.Mirror), so the record is read from etcd when the mirror has it.
func (e *Engine) committedBefore(ctx context.Context, st *staged) (bool, int64, error) {
	key := facts.Event(st.id)
	var recorded bool
	e.mirror.View(func(r facts.Reader) { _, recorded = r.Get(key) })
	if !recorded {
		return false, 0, nil
	}
	f, ok, err := e.store.Get(ctx, key)
	if err != nil {
		return false, 0, fmt.Errorf("read the firing record %s after a conflict: %w", key, err)
	}
	if ok && e.ours(f, st) {
		return true, f.ModRevision, nil
	}
	return false, 0, nil
}

// ours reports whether a record is the one this engine wrote for st (and
// not another writer's that happens to have the same id).
func (e *Engine) ours(f facts.Fact, st *staged) bool {
	var rec facts.EventRecord
	if json.Unmarshal(f.Value, &rec) != nil {
		return false
	}
	return rec.Leader == e.cfg.Identity && rec.Rule == st.f.Rule && rec.Time == st.at.Format(timeLayout)
}

// opsLimit and bytesLimit are the transaction limits in force: the
// configured ones, lowered when etcd refuses a transaction as too large.
func (e *Engine) opsLimit() int   { return int(e.maxOps.Load()) }
func (e *Engine) bytesLimit() int { return int(e.maxBytes.Load()) }

// shrinkLimits halves the limit etcd refused a chunk for: the configured
// MaxTxnOps or MaxTxnBytes is above etcd's own (--max-txn-ops,
// --max-request-bytes). The plan goes on in smaller transactions.
func (e *Engine) shrinkLimits(chunk []*staged, err error) {
	ops, size := 0, 0
	for _, st := range chunk {
		ops += len(st.f.Writes) + 1
		size += st.bytes
	}
	if errors.Is(err, rpctypes.ErrTooManyOps) {
		e.maxOps.Store(int64(max(4, ops/2)))
	} else {
		e.maxBytes.Store(int64(max(4096, size/2)))
	}
	e.log.Warn("engine: etcd refused a transaction as too large; lowering the engine's limits (configure MaxTxnOps and MaxTxnBytes below etcd's)",
		"err", err, "ops", ops, "bytes", size, "max_txn_ops", e.opsLimit(), "max_txn_bytes", e.bytesLimit())
}

// dropStale removes the firings that read a fact whose revision is no longer
// the one they read, and returns the keys that changed under them and the
// keys they would have written. A binding that read such a write in the
// round and so concluded that nothing was to be done has no firing to drop
// with it: only evaluating the written keys again reaches it (an endpoint
// withheld because a stop, dropped here, deleted its instance's placement).
func dropStale(r facts.Reader, run *planRun, pending []*staged) ([]*staged, []string) {
	var changed []string
	out := pending[:0]
	for _, st := range pending {
		fresh := true
		for _, rd := range st.f.Reads {
			if !guarded(rd) {
				continue
			}
			if rd.Prefix {
				r.Prefix(rd.Key, func(f facts.Fact) bool {
					fresh = false
					changed = append(changed, f.Key) // the key that now matches the absent pattern
					return false
				})
				continue
			}
			var cur int64
			if f, ok := r.Get(rd.Key); ok {
				cur = f.ModRevision
			}
			if cur != rd.Rev {
				fresh = false
				changed = append(changed, rd.Key)
			}
		}
		if fresh {
			out = append(out, st)
			continue
		}
		run.drop(st)
		changed = append(changed, writtenKeys(st)...)
	}
	return out, changed
}

// writtenKeys are the keys st writes.
func writtenKeys(st *staged) []string {
	out := make([]string, len(st.f.Writes))
	for i, w := range st.f.Writes {
		out[i] = w.Key
	}
	return out
}

// guarded reports whether a read becomes a compare: not a value written
// earlier in the plan (Own: ordering protects it), not an aggregate member
// (NoGuard: listed in the record only), not the clock (volatile).
func guarded(r eval.Read) bool { return !r.Own && !r.NoGuard && !volatile[r.Key] }

// volatile are the keys whose reads are never compared: the clock, which the
// server rewrites every second (facts.FactType.Volatile).
var volatile = facts.VolatileKeys()

// condKey tells a prefix compare from a compare of the key itself.
func condKey(r eval.Read) string {
	if r.Prefix {
		return r.Key + "\x00prefix"
	}
	return r.Key
}

// changesFor presents keys as changes, as they stand in r, so that the
// evaluator re-evaluates the bindings that read them.
func changesFor(r facts.Reader, keys map[string]bool) []facts.Change {
	ks := make([]string, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	out := make([]facts.Change, 0, len(ks))
	for _, k := range ks {
		if f, ok := r.Get(k); ok {
			out = append(out, facts.Change{Fact: f})
		} else {
			out = append(out, facts.Change{Fact: facts.Fact{Key: k, ModRevision: r.Rev()}, Deleted: true})
		}
	}
	return out
}
