package agent

import (
	"context"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/ccattler/ccattler/facts"
)

// report writes what differs between what the node knows and what it last
// committed: its node facts, observed/instance/{id}/node|state|image|ip|
// health|started_at|resources/cpu|resources/memory|spec_digest of every instance it
// holds, with the reason and exit status of a failed one, and the node's
// cache problem if it had one. It writes no event: the failure policy
// records what it reports (DESIGN §6, only the engine writes event/).
// After a new lease or a reconnect everything is written again, because
// anything may have happened to etcd meanwhile.
func (n *node) report(ctx context.Context) {
	if !n.a.link.up.Load() {
		return // nothing would get through; the link's next epoch brings a full report
	}
	s := n.a.cfg.Store.Schema
	n.mu.Lock()
	epoch, gen := n.a.link.epoch.Load(), n.leaseGen
	if epoch != n.haveEpoch || gen != n.haveGen {
		for k, r := range n.reported {
			r.have = ""
			n.reported[k] = r
		}
		n.haveEpoch, n.haveGen = epoch, gen
	}
	want := make(map[string]string, len(n.nodeFacts)+6*len(n.wants))
	if n.lease != 0 { // registration itself is holdLease's: the node's facts go with its lease
		for k, v := range n.nodeFacts {
			want[k] = v
		}
		if n.draining {
			delete(want, facts.NodeState(n.cfg.ID))
		}
	}
	var usedCPU float64
	var usedMem int64
	put := func(key string, v any) {
		scalar := false
		switch v.(type) {
		case string, float64, int64, time.Time:
			scalar = true // comparable: the same value has the same encoding
		}
		r := n.reported[key]
		if scalar && r.v == v {
			want[key] = r.raw
			return
		}
		raw, err := s.Encode(key, v)
		if err != nil {
			n.log.Error("cannot report", "key", key, "err", err)
			return
		}
		want[key] = string(raw)
		r.v, r.raw = nil, ""
		if scalar {
			r.v, r.raw = v, want[key]
		}
		n.reported[key] = r
	}
	var stoppedIDs []string
	for id := range n.wants {
		st, exists := n.actual[id]
		f := n.failed[id]
		switch {
		case exists && st.Running:
			usedCPU += st.Spec.CPU
			usedMem += st.Spec.Memory
			put(facts.InstanceNode(id), n.cfg.ID)
			put(facts.InstanceState(id), "running")
			if st.Image != "" {
				put(facts.InstanceImage(id), st.Image)
			}
			if st.IP != "" {
				put(facts.InstanceIP(id), st.IP)
			}
			h := st.Health
			if h == "" {
				h = n.health[id]
			}
			if h == "" {
				h = Unknown
			}
			put(facts.InstanceHealth(id), h)
			if !st.StartedAt.IsZero() {
				put(facts.InstanceStartedAt(id), st.StartedAt)
			}
			// What it was started with: a changed service replaces it (policies/rollout.hcl).
			put(facts.InstanceCPU(id), st.Spec.CPU)
			put(facts.InstanceMemory(id), st.Spec.Memory)
			if st.Spec.Digest != "" {
				put(facts.InstanceSpecDigest(id), st.Spec.Digest)
			}
		case f != nil:
			put(facts.InstanceNode(id), n.cfg.ID)
			put(facts.InstanceState(id), "failed")
			put(facts.InstanceHealth(id), Unknown)
			// The image it ran, or failed to start: a rollout halts on the
			// failures of its new image (policies/rollout.hcl).
			if img := st.Spec.Image; exists && img != "" {
				put(facts.InstanceImage(id), img)
			} else if img := n.wants[id].Image; img != "" {
				put(facts.InstanceImage(id), img)
			}
			// Likewise its command, args, env and labels, by their digest.
			if d := st.Spec.Digest; exists && d != "" {
				put(facts.InstanceSpecDigest(id), d)
			} else if d := n.wants[id].Digest; !exists && d != "" {
				put(facts.InstanceSpecDigest(id), d)
			}
			// Why, for the failure policy to record (the engine writes the
			// event, not the node) and for `ccattler get services` to show.
			put(facts.InstanceReason(id), clip(f.reason, facts.MaxReason))
			if f.exit != nil {
				put(facts.InstanceExitStatus(id), int64(*f.exit))
			}
		}
	}
	for id := range n.stopped {
		if on, _ := n.a.feed.PlacedOn(id); on != "" && on != n.cfg.ID {
			stoppedIDs = append(stoppedIDs, id) // it runs elsewhere now: that node reports it
			continue
		}
		put(facts.InstanceState(id), "stopped")
		put(facts.InstanceHealth(id), Unknown)
		stoppedIDs = append(stoppedIDs, id)
	}
	if n.lease != 0 {
		put(facts.NodeAvailableCPU(n.cfg.ID), max(n.cfg.CPU-usedCPU, 0))
		put(facts.NodeAvailableMemory(n.cfg.ID), max(n.cfg.Memory-usedMem, 0))
	}
	if n.cacheErr != "" && n.lease != 0 {
		put(facts.NodeCacheError(n.cfg.ID), clip(n.cacheErr, facts.MaxReason))
	}
	if len(n.reported) > len(want) { // instances gone: forget them (at worst a fact is written again)
		for k := range n.reported {
			if _, ok := want[k]; !ok {
				delete(n.reported, k)
			}
		}
	}
	var ops []facts.Op
	keys := make([]string, 0, len(want))
	for k, v := range want {
		if n.reported[k].have != v {
			keys = append(keys, k)
		}
	}
	n.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys) // deterministic batches
	for _, k := range keys {
		ops = append(ops, facts.Put(k, []byte(want[k])))
	}
	if err := n.a.w.Write(ctx, ops); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("report to etcd failed; will retry", "writes", len(ops), "err", err)
		}
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, k := range keys {
		r := n.reported[k]
		r.have = want[k]
		n.reported[k] = r
	}
	if _, sent := want[facts.NodeCacheError(n.cfg.ID)]; sent {
		n.cacheErr = "" // reported once; the failure policy records and removes it
	}
	for _, id := range stoppedIDs {
		delete(n.stopped, id)
		for _, attr := range []string{"node", "state", "image", "ip", "health", "started_at", "resources/cpu", "resources/memory", "spec_digest", "reason", "exit_status"} {
			delete(n.reported, facts.InstanceAttr(id, attr))
		}
	}
}

// reported is what report knows of one of the node's facts, in one map
// entry (a node holds one for every fact it reports, about nine an
// instance): the value it last encoded, when comparable, and the encoding,
// and what it last committed. Every report states all of a node's facts
// and writes those that differ from what etcd has; encoding them all
// through the schema each time was a third of a simulated node's work at
// 100,000 instances.
type reported struct {
	v    any    // a scalar value (string, float64, int64, time.Time); nil: none cached
	raw  string // v's encoding
	have string // the encoding last committed under the key in this link epoch and lease ("": none)
}

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = " ..."
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
