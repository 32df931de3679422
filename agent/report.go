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
// It reports whether etcd holds all of it: nothing was left to write, or
// the writes committed.
func (n *node) report(ctx context.Context) bool {
	if !n.a.link.up.Load() {
		return false // nothing would get through; the link's next epoch brings a full report
	}
	ops, done := n.changes()
	if len(ops) == 0 {
		return true
	}
	if err := n.a.w.Write(ctx, ops); err != nil {
		if ctx.Err() == nil {
			n.log.Warn("report to etcd failed; will retry", "writes", len(ops), "err", err)
		}
		return false
	}
	done()
	return true
}

// changes returns the writes a report makes, sorted by key (deterministic
// batches), and what to note once they committed. Each instance is stated
// as one value (instanceState) and compared with the one last committed, so
// a report of one change on a node of 30,000 instances compares 30,000
// small values, not 270,000 facts through maps.
func (n *node) changes() ([]facts.Op, func()) {
	s := n.a.cfg.Store.Schema
	n.mu.Lock()
	defer n.mu.Unlock()
	epoch, gen := n.a.link.epoch.Load(), n.leaseGen
	if epoch != n.haveEpoch || gen != n.haveGen {
		for k, r := range n.reported {
			r.have = ""
			n.reported[k] = r
		}
		clear(n.stated)
		n.haveEpoch, n.haveGen = epoch, gen
	}
	var ops []facts.Op
	type commit struct {
		id string
		st instanceState
	}
	var commits []commit
	held := 0 // instances stated now that have a committed state
	state := func(id string, cur instanceState) {
		prev, ok := n.stated[id]
		if ok {
			held++
			if prev.has&^cur.has != 0 {
				// Facts no longer stated are forgotten: stated again
				// later, they are written again.
				prev.has &= cur.has
				n.stated[id] = prev
			}
		}
		if cur.has == 0 {
			return
		}
		if ok && prev == cur {
			return
		}
		ops, cur = n.appendDiff(ops, id, cur, prev, s)
		commits = append(commits, commit{id, cur})
	}
	var usedCPU float64
	var usedMem int64
	for id := range n.wants {
		cur := n.instanceState(id)
		if cur.state == "running" {
			usedCPU += cur.cpu
			usedMem += cur.mem
		}
		if n.stopped[id] {
			continue // stated with the stopped ones below
		}
		state(id, cur)
	}
	var stoppedIDs []string
	for id := range n.stopped {
		stoppedIDs = append(stoppedIDs, id)
		if on, _ := n.a.feed.PlacedOn(id); on != "" && on != n.cfg.ID {
			continue // it runs elsewhere now: that node reports it
		}
		var cur instanceState
		if _, wanted := n.wants[id]; wanted {
			cur = n.instanceState(id)
		}
		cur.state, cur.health = "stopped", Unknown
		cur.has |= hasState | hasHealth
		state(id, cur)
	}
	if len(n.stated) > held { // instances gone: forget them (at worst their facts are written again)
		for id := range n.stated {
			if _, wanted := n.wants[id]; !wanted && !n.stopped[id] {
				delete(n.stated, id)
			}
		}
	}
	ops = n.nodeChanges(ops, usedCPU, usedMem)
	if len(ops) == 0 {
		return nil, nil
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Key < ops[j].Key })
	return ops, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, op := range ops {
			if r, ok := n.reported[op.Key]; ok {
				r.have = string(op.Value)
				n.reported[op.Key] = r
			}
		}
		for _, c := range commits {
			n.stated[c.id] = c.st
		}
		if _, sent := n.reported[facts.NodeCacheError(n.cfg.ID)]; sent {
			n.cacheErr = "" // reported once; the failure policy records and removes it
			delete(n.reported, facts.NodeCacheError(n.cfg.ID))
		}
		for _, id := range stoppedIDs {
			delete(n.stopped, id)
			delete(n.stated, id)
		}
	}
}

// nodeChanges appends the writes of the node's own facts that differ from
// what it last committed: its registration facts, what it has available,
// its cache problem.
func (n *node) nodeChanges(ops []facts.Op, usedCPU float64, usedMem int64) []facts.Op {
	s := n.a.cfg.Store.Schema
	want := map[string]string{}
	if n.lease != 0 { // registration itself is holdLease's: the node's facts go with its lease
		for k, v := range n.nodeFacts {
			want[k] = v
		}
		if n.draining {
			delete(want, facts.NodeState(n.cfg.ID))
		}
	}
	put := func(key string, v any) {
		r := n.reported[key]
		if r.v == v {
			want[key] = r.raw
			return
		}
		raw, err := s.Encode(key, v)
		if err != nil {
			n.log.Error("cannot report", "key", key, "err", err)
			return
		}
		want[key] = string(raw)
		r.v, r.raw = v, string(raw)
		n.reported[key] = r
	}
	if n.lease != 0 {
		put(facts.NodeAvailableCPU(n.cfg.ID), max(n.cfg.CPU-usedCPU, 0))
		put(facts.NodeAvailableMemory(n.cfg.ID), max(n.cfg.Memory-usedMem, 0))
	}
	if n.cacheErr != "" && n.lease != 0 {
		put(facts.NodeCacheError(n.cfg.ID), clip(n.cacheErr, facts.MaxReason))
	}
	for k := range n.reported {
		if _, ok := want[k]; !ok {
			delete(n.reported, k)
		}
	}
	for k, v := range want {
		r, ok := n.reported[k]
		if !ok || r.have != v {
			if !ok {
				n.reported[k] = reported{}
			}
			ops = append(ops, facts.Put(k, []byte(v)))
		}
	}
	return ops
}

// reported is what report knows of one of the node's own facts: the value
// it last encoded, when comparable, and the encoding, and what it last
// committed.
type reported struct {
	v    any    // a scalar value (string, float64); nil: none cached
	raw  string // v's encoding
	have string // the encoding last committed under the key in this link epoch and lease ("": none)
}

// instanceState is what a node states of one instance, a value per fact;
// has says which facts it states.
type instanceState struct {
	has                                            uint16
	node, state, image, ip, health, digest, reason string
	startedAt                                      time.Time
	cpu                                            float64
	mem, exit                                      int64
}

const (
	hasNode uint16 = 1 << iota
	hasState
	hasImage
	hasIP
	hasHealth
	hasStartedAt
	hasCPU
	hasMemory
	hasDigest
	hasReason
	hasExit
)

// instanceFacts are the facts an instanceState holds: which bit, which key,
// which value.
var instanceFacts = []struct {
	bit uint16
	key func(id string) string
	val func(s *instanceState) any
}{
	{hasNode, facts.InstanceNode, func(s *instanceState) any { return s.node }},
	{hasState, facts.InstanceState, func(s *instanceState) any { return s.state }},
	{hasImage, facts.InstanceImage, func(s *instanceState) any { return s.image }},
	{hasIP, facts.InstanceIP, func(s *instanceState) any { return s.ip }},
	{hasHealth, facts.InstanceHealth, func(s *instanceState) any { return s.health }},
	{hasStartedAt, facts.InstanceStartedAt, func(s *instanceState) any { return s.startedAt }},
	{hasCPU, facts.InstanceCPU, func(s *instanceState) any { return s.cpu }},
	{hasMemory, facts.InstanceMemory, func(s *instanceState) any { return s.mem }},
	{hasDigest, facts.InstanceSpecDigest, func(s *instanceState) any { return s.digest }},
	{hasReason, facts.InstanceReason, func(s *instanceState) any { return s.reason }},
	{hasExit, facts.InstanceExitStatus, func(s *instanceState) any { return s.exit }},
}

// appendDiff appends a write of every fact s states that prev (has 0:
// none committed) does not hold with the same value, and returns s as
// written: a fact that does not encode is logged and left out, so that it
// is tried again.
func (n *node) appendDiff(ops []facts.Op, id string, s, prev instanceState, schema *facts.Schema) ([]facts.Op, instanceState) {
	for _, f := range instanceFacts {
		if s.has&f.bit == 0 {
			continue
		}
		v := f.val(&s)
		if prev.has&f.bit != 0 && f.val(&prev) == v {
			continue
		}
		key := f.key(id)
		raw, err := schema.Encode(key, v)
		if err != nil {
			n.log.Error("cannot report", "key", key, "err", err)
			s.has &^= f.bit
			continue
		}
		ops = append(ops, facts.Put(key, raw))
	}
	return ops, s
}

// instanceState is what the node states of instance id, one of its wants:
// where it runs and how, or why it failed; nothing while it starts.
func (n *node) instanceState(id string) instanceState {
	st, exists := n.actual[id]
	var s instanceState
	switch f := n.failed[id]; {
	case exists && st.Running:
		s.node, s.state = n.cfg.ID, "running"
		s.has = hasNode | hasState | hasHealth | hasCPU | hasMemory
		if st.Image != "" {
			s.image, s.has = st.Image, s.has|hasImage
		}
		if st.IP != "" {
			s.ip, s.has = st.IP, s.has|hasIP
		}
		h := st.Health
		if h == "" {
			h = n.health[id]
		}
		if h == "" {
			h = Unknown
		}
		s.health = h
		if !st.StartedAt.IsZero() {
			s.startedAt, s.has = st.StartedAt, s.has|hasStartedAt
		}
		// What it was started with: a changed service replaces it (policies/rollout.hcl).
		s.cpu, s.mem = st.Spec.CPU, st.Spec.Memory
		if st.Spec.Digest != "" {
			s.digest, s.has = st.Spec.Digest, s.has|hasDigest
		}
	case f != nil:
		s.node, s.state, s.health = n.cfg.ID, "failed", Unknown
		s.has = hasNode | hasState | hasHealth | hasReason
		// The image it ran, or failed to start: a rollout halts on the
		// failures of its new image (policies/rollout.hcl).
		var ran, placed Spec // what it was started with, if it was; what is placed
		if exists {
			ran = st.Spec
		}
		if w := n.wants[id]; w != nil {
			placed = w.Spec
		}
		if img := ran.Image; img != "" {
			s.image, s.has = img, s.has|hasImage
		} else if img := placed.Image; img != "" {
			s.image, s.has = img, s.has|hasImage
		}
		// Likewise its command, args, env and labels, by their digest.
		if d := ran.Digest; d != "" {
			s.digest, s.has = d, s.has|hasDigest
		} else if d := placed.Digest; !exists && d != "" {
			s.digest, s.has = d, s.has|hasDigest
		}
		// Why, for the failure policy to record (the engine writes the
		// event, not the node) and for `ccattler get services` to show.
		s.reason = clip(f.reason, facts.MaxReason)
		if f.exit != nil {
			s.exit, s.has = int64(*f.exit), s.has|hasExit
		}
	}
	return s
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
