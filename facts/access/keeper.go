package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/ccattler/ccattler/facts"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keeper keeps etcd's users and roles in step with the auth/ facts: every
// auth/{principal}/rules becomes that principal's access, {service} follows
// the services under desired/service/, and a principal whose rules are
// removed loses its access at the next sync, within about Debounce.
type Keeper struct {
	// Admin is a store authenticated as etcd's root user: only root may
	// manage users and roles.
	Admin *facts.Store
	// Mirror supplies the facts; its store's Root is the root the grants
	// are relative to.
	Mirror *facts.Mirror
	Root   string
	// Debounce gathers the changes of a burst into one sync; Interval is
	// how often a sync runs regardless (repairing access changed behind
	// its back). Defaults 200ms and 30s.
	Debounce, Interval time.Duration
	Log                *slog.Logger

	bad map[string]string // auth/ keys found invalid, and why: logged once each
}

// Run syncs now and on every relevant change until ctx is done. A failed
// sync is logged and retried with backoff; it never stops the server.
func (k *Keeper) Run(ctx context.Context) {
	if k.Debounce <= 0 {
		k.Debounce = 200 * time.Millisecond
	}
	if k.Interval <= 0 {
		k.Interval = 30 * time.Second
	}
	if k.Log == nil {
		k.Log = slog.New(slog.DiscardHandler)
	}
	sub := k.Mirror.Subscribe()
	defer sub.Close()
	retry := time.Duration(0)
	tick := time.NewTicker(k.Interval)
	defer tick.Stop()
	dirty := true
	for {
		if dirty {
			if err := k.SyncOnce(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				retry = min(max(2*retry, 250*time.Millisecond), 10*time.Second)
				k.Log.Warn("access: sync of etcd users and roles failed; retrying", "in", retry, "err", err)
			} else {
				dirty, retry = false, 0
			}
		}
		var wait <-chan time.Time
		if dirty {
			wait = time.After(retry)
		}
		select {
		case <-ctx.Done():
			return
		case <-wait:
		case <-tick.C:
			dirty = true
		case <-sub.Ready():
			if !relevant(sub.Take()) {
				continue
			}
			// Let the rest of a burst (an apply of many services) arrive.
			if !facts.Sleep(ctx, k.Debounce) {
				return
			}
			sub.Take()
			dirty = true
		}
	}
}

// relevant reports whether a batch touches auth/ or a service's existence.
func relevant(bs []facts.Batch) bool {
	for _, b := range bs {
		if b.Relist {
			return true
		}
		for _, c := range b.Changes {
			if strings.HasPrefix(c.Key, "auth/") || isServiceKey(c.Key) {
				return true
			}
		}
	}
	return false
}

func isServiceKey(key string) bool {
	name, ok := strings.CutPrefix(key, "desired/service/")
	return ok && name != "" && !strings.Contains(name, "/")
}

// SyncOnce makes etcd's access what the mirror's facts say now.
func (k *Keeper) SyncOnce(ctx context.Context) error {
	ps, services := k.read()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ch, err := Sync(cctx, k.Admin, Want(k.Root, ps, services))
	if err != nil {
		return err
	}
	if !ch.Zero() {
		names := make([]string, 0, len(ps))
		for p := range ps {
			names = append(names, p)
		}
		sort.Strings(names)
		k.Log.Info("access: etcd users and roles synced", "changes", ch.String(), "principals", strings.Join(names, ","), "services", len(services))
	}
	return nil
}

// read collects the principals' rules and the service names. An invalid
// rules value grants nothing (its principal loses what it had), logged
// once per key and value.
func (k *Keeper) read() (map[string]Rules, []string) {
	ps := map[string]Rules{}
	var services []string
	if k.bad == nil {
		k.bad = map[string]string{}
	}
	k.Mirror.View(func(r facts.Reader) {
		r.Prefix("auth/", func(f facts.Fact) bool {
			principal, ok := PrincipalOf(f.Key)
			if !ok {
				return true
			}
			rules, err := Parse(principal, f.Value)
			if err != nil {
				if k.bad[f.Key] != string(f.Value) {
					k.bad[f.Key] = string(f.Value)
					k.Log.Warn("access: invalid rules grant nothing", "key", f.Key, "err", err)
				}
				return true
			}
			delete(k.bad, f.Key)
			ps[principal] = rules
			return true
		})
		r.Prefix("desired/service/", func(f facts.Fact) bool {
			if isServiceKey(f.Key) {
				services = append(services, strings.TrimPrefix(f.Key, "desired/service/"))
			}
			return true
		})
	})
	return ps, services
}

// Bootstrap writes the built-in principals' rules where none are written
// yet (an administrator's edit is kept across restarts) and reports which
// it wrote. s must be allowed to write auth/.
func Bootstrap(ctx context.Context, s *facts.Store, builtins map[string]Rules) ([]string, error) {
	var wrote []string
	for _, p := range sortedKeys(builtins) {
		key := s.Abs(facts.AuthRules(p))
		resp, err := s.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(builtins[p].Encode()))).Commit()
		if err != nil {
			return wrote, fmt.Errorf("access: write %s: %w", facts.AuthRules(p), err)
		}
		if resp.Succeeded {
			wrote = append(wrote, p)
		}
	}
	return wrote, nil
}

// PrincipalOf returns the principal of an auth/{principal}/rules key
// (relative to the root).
func PrincipalOf(key string) (string, bool) {
	p, ok := strings.CutSuffix(strings.TrimPrefix(key, "auth/"), "/rules")
	return p, ok && strings.HasPrefix(key, "auth/") && p != "" && !strings.Contains(p, "/")
}

// IsDenied reports whether err, or an error it wraps (the store's
// "commit N writes: ..."), is etcd refusing a principal.
func IsDenied(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		switch rpctypes.Error(err) {
		case rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed, rpctypes.ErrUserNotFound:
			return true
		}
	}
	return false
}
