package reload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// The control channel lives in etcd next to the fact root, not under it:
// a request is not a fact, and the mirror and the rules never see it.
//
//	{root}-ctl/reload            the latest `ccattler rules reload` request (Request)
//	{root}-ctl/status/{server}   each server's Status, on a lease

// CtlPrefix returns the control prefix of a fact root: /ccattler/ -> /ccattler-ctl/.
func CtlPrefix(root string) string { return strings.TrimSuffix(root, "/") + "-ctl/" }

// RequestKey is the etcd key `ccattler rules reload` writes.
func RequestKey(root string) string { return CtlPrefix(root) + "reload" }

// StatusKey is the etcd key of a server's status.
func StatusKey(root, server string) string { return CtlPrefix(root) + "status/" + server }

// Request asks every running server to reload its rule set.
type Request struct {
	ID string    `json:"id"`
	By string    `json:"by,omitempty"` // who asked: user@host
	At time.Time `json:"at"`
}

// Run answers reload requests, keeps this server's status key current and,
// with Watch, watches Dir, until ctx is done; it then removes the status.
func (r *Reloader) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.statusLoop(ctx) }()
	if r.Status().Watch {
		wg.Add(1)
		go func() { defer wg.Done(); r.watchDir(ctx) }()
	}
	r.requestLoop(ctx)
	wg.Wait()
}

// requestLoop watches the request key and reloads on every new request.
// Requests made before the server started are not replayed: they were
// answered, or asked of another server.
func (r *Reloader) requestLoop(ctx context.Context) {
	ctl, key := r.cfg.Store.WithRoot(CtlPrefix(r.cfg.Store.Root)), RequestKey(r.cfg.Store.Root)
	var from int64
	// A watch that breaks again at once (etcd without quorum, a member
	// gone) is retried after a pause that doubles up to watchBackoffMax,
	// so a long outage costs a few warnings, not ten a second. A watch
	// that delivered something, or lasted, starts the pause over.
	pause := time.Duration(0)
	backoff := func() {
		pause = min(max(2*pause, watchBackoffMin), watchBackoffMax)
		facts.Sleep(ctx, pause)
	}
	for ctx.Err() == nil {
		if from == 0 {
			_, rev, err := ctl.List(ctx, "reload", 0)
			if err != nil {
				r.log.Warn("reload: cannot read the request key; retrying", "key", key, "err", err, "in", min(max(2*pause, watchBackoffMin), watchBackoffMax))
				backoff()
				continue
			}
			from = rev + 1
		}
		wctx, cancel := context.WithCancel(ctx)
		began, healthy := time.Now(), false
		for resp := range ctl.WatchChanges(wctx, "reload", from) {
			if err := resp.Err; err != nil {
				if ctx.Err() == nil {
					r.log.Warn("reload: request watch broke; watching again", "key", key, "err", err,
						"in", min(max(2*pause, watchBackoffMin), watchBackoffMax))
				}
				if resp.CompactRevision > 0 {
					from = 0 // requests in the compacted range are lost; watch from now
				}
				break
			}
			healthy = true
			for _, c := range resp.Changes {
				from = c.ModRevision + 1
				if c.Deleted {
					continue
				}
				var req Request
				if err := json.Unmarshal(c.Value, &req); err != nil || req.ID == "" {
					r.log.Warn("reload: ignoring a malformed request", "key", key, "value", string(c.Value))
					continue
				}
				r.log.Info("reload: requested", "id", req.ID, "by", req.By)
				r.Reload(ctx, "request", req.ID)
			}
		}
		cancel()
		if healthy || time.Since(began) > watchHealthy {
			pause = 0
		}
		backoff()
	}
}

// The pauses between attempts of a broken request watch.
var (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 10 * time.Second
	watchHealthy    = 30 * time.Second // a watch that lasted this long was not failing
)

// statusLoop writes the status whenever it changes, on a lease kept alive
// while the server runs: a server that stops leaves no stale status behind.
func (r *Reloader) statusLoop(ctx context.Context) {
	ctl, key := r.cfg.Store.WithRoot(CtlPrefix(r.cfg.Store.Root)), StatusKey(r.cfg.Store.Root, r.cfg.Identity)
	ttl := max(r.cfg.StatusTTL, time.Second)
	for ctx.Err() == nil {
		lease, err := ctl.Grant(ctx, ttl)
		if err != nil {
			r.log.Warn("reload: cannot grant the status lease; retrying", "err", err)
			facts.Sleep(ctx, time.Second)
			continue
		}
		ka, err := ctl.KeepAlive(ctx, lease)
		if err != nil {
			facts.Sleep(ctx, time.Second)
			continue
		}
		r.touch()
	alive:
		for {
			select {
			case <-ctx.Done():
				// A second, as the engine's resignation: an etcd
				// without quorum (the cluster's last server stopping)
				// never answers, and held the stop for the 5s this
				// waited before. A loaded etcd may take longer; the
				// lease's expiry is the fallback, a TTL later.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				_ = ctl.Revoke(rctx, lease)
				cancel()
				return
			case _, ok := <-ka:
				if !ok {
					break alive // the lease is gone (etcd restarted, long partition): grant another
				}
			case <-r.changed:
				b, _ := json.Marshal(r.Status())
				put := facts.Op{Key: ctl.Rel(key), Value: b, Lease: lease}
				if _, err := ctl.Commit(ctx, facts.Txn{Ops: []facts.Op{put}, Checked: true}); err != nil && ctx.Err() == nil {
					r.log.Warn("reload: cannot write the status", "key", key, "err", err)
					r.touch()
					facts.Sleep(ctx, time.Second)
				}
			}
		}
	}
}

// Ask writes a reload request and returns it with the revision it was
// written at; servers answer in their status keys (Answers).
func Ask(ctx context.Context, s *facts.Store, by string) (Request, int64, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	req := Request{ID: hex.EncodeToString(b[:]), By: by, At: time.Now().UTC()}
	raw, _ := json.Marshal(req)
	ctl := s.WithRoot(CtlPrefix(s.Root))
	rev, err := ctl.Commit(ctx, facts.Txn{Ops: []facts.Op{facts.Put("reload", raw)}, Checked: true})
	if err != nil {
		return req, 0, fmt.Errorf("write the reload request %s: %w", RequestKey(s.Root), err)
	}
	return req, rev, nil
}

// Answers waits until every server that had a status at revision rev has
// answered request id, or ctx is done; it returns the answers so far by
// server (each status' LastRequest set to the answer to id), and the
// servers that were asked.
func Answers(ctx context.Context, s *facts.Store, id string, rev int64) (map[string]Status, []string, error) {
	ctl := s.WithRoot(CtlPrefix(s.Root))
	prefix := ctl.Abs("status/")
	have, _, err := ctl.List(ctx, "status/", rev)
	if err != nil {
		return nil, nil, fmt.Errorf("read the servers' status under %s: %w", prefix, err)
	}
	var asked []string
	for _, f := range have {
		asked = append(asked, strings.TrimPrefix(f.Key, "status/"))
	}
	got := map[string]Status{}
	if len(asked) == 0 {
		return got, nil, nil // no server to answer
	}
	note := func(v []byte) {
		var st Status
		if json.Unmarshal(v, &st) != nil {
			return
		}
		for _, res := range st.Requests {
			if res.Request == id {
				st.LastRequest = &res
				got[st.Server] = st
			}
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := ctl.WatchChanges(wctx, "status/", rev+1)
	// An answer may have come before the watch started: it is in the
	// watch's history from rev+1, so nothing is missed.
	for len(got) < len(asked) {
		select {
		case <-ctx.Done():
			return got, asked, ctx.Err()
		case wr, ok := <-wch:
			if !ok {
				return got, asked, fmt.Errorf("watch of %s ended", prefix)
			}
			if err := wr.Err; err != nil {
				return got, asked, fmt.Errorf("watch of %s: %w", prefix, err)
			}
			for _, c := range wr.Changes {
				if !c.Deleted {
					note(c.Value)
				}
			}
		}
	}
	return got, asked, nil
}

// ReadStatus returns every running server's status, sorted by server, with
// Leading set on the server whose engine holds the election under
// leaderPrefix.
func ReadStatus(ctx context.Context, s *facts.Store, leaderPrefix string) ([]Status, int64, error) {
	ctl := s.WithRoot(CtlPrefix(s.Root))
	have, rev, err := ctl.List(ctx, "status/", 0)
	if err != nil {
		return nil, 0, fmt.Errorf("read the servers' status under %s: %w", ctl.Abs("status/"), err)
	}
	leader, _ := s.Leader(ctx, leaderPrefix) // none known: nobody is shown leading
	var out []Status
	for _, f := range have {
		var st Status
		if err := json.Unmarshal(f.Value, &st); err != nil {
			return nil, 0, fmt.Errorf("status %s: %w", ctl.Abs(f.Key), err)
		}
		st.Leading = leader != "" && st.Server == leader
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out, rev, nil
}
