package agent

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/ccattler/ccattler/facts"
)

// VolumeRemover is implemented by runtimes that keep volumes on the node
// (agent/containerd): the data of a volume that is not persistent goes with
// the last instance that used it on the node.
type VolumeRemover interface {
	RemoveVolume(name string) error
}

// Volumes reports, for every volume a running container of its nodes mounts,
// observed/volume/{name}/attached_node and state = attached; once the last
// container using it on that node is gone, state = detached (attached_node
// stays: a persistent volume's data lives on that node, and the scheduler
// keeps instances of a single-node volume there) and the data of a volume
// whose persistent is false is removed (state = error if that fails). The runtime provides the
// volume itself (agent/containerd: a directory under the state dir).
type Volumes struct {
	Store    *facts.Store
	Nodes    []NodeConfig
	Interval time.Duration // 1s if 0
	Log      *slog.Logger

	have map[string]string // volume -> node it was last reported attached to
}

// Run reports until ctx is done.
func (v *Volumes) Run(ctx context.Context) {
	every := v.Interval
	if every <= 0 {
		every = time.Second
	}
	if v.Log == nil {
		v.Log = slog.Default()
	}
	v.have = map[string]string{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := v.report(ctx); err != nil && ctx.Err() == nil {
			v.Log.Warn("report volumes; will retry", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (v *Volumes) report(ctx context.Context) error {
	used := map[string]string{} // volume -> node of a running container using it
	for _, n := range v.Nodes {
		list, err := n.Runtime.List(ctx)
		if err != nil {
			return err
		}
		for _, st := range list {
			if st.Running && st.Spec.Volume != "" {
				used[st.Spec.Volume] = n.ID
			}
		}
	}
	s := v.Store.Schema
	var ops []facts.Op
	put := func(key string, val any) error {
		raw, err := s.Encode(key, val)
		if err != nil {
			return err
		}
		ops = append(ops, facts.Put(key, raw))
		return nil
	}
	for vol, node := range used {
		if v.have[vol] == node {
			continue
		}
		if err := put(facts.VolumeAttachedNode(vol), node); err != nil {
			return err
		}
		if err := put(facts.VolumeState(vol), "attached"); err != nil {
			return err
		}
	}
	for vol, node := range v.have {
		if _, ok := used[vol]; !ok {
			state := "detached"
			if err := v.removeUnlessPersistent(ctx, vol, node); err != nil {
				v.Log.Error("remove the data of a volume that is not persistent", "volume", vol, "node", node, "err", err)
				state = "error"
			}
			if err := put(facts.VolumeState(vol), state); err != nil {
				return err
			}
		}
	}
	if len(ops) == 0 {
		return nil
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Key < ops[j].Key })
	if _, err := v.Store.Commit(ctx, facts.Txn{Ops: ops}); err != nil {
		return err
	}
	v.have = used
	return nil
}

// removeUnlessPersistent removes a detached volume's data from node when
// desired/volume/{vol}/persistent is false. A volume without that fact, or
// one no longer desired, keeps its data: deleting is not a default.
func (v *Volumes) removeUnlessPersistent(ctx context.Context, vol, node string) error {
	f, ok, err := v.Store.Get(ctx, facts.VolumePersistent(vol))
	if err != nil || !ok || string(f.Value) != "false" {
		return err
	}
	for _, n := range v.Nodes {
		if r, ok := n.Runtime.(VolumeRemover); ok && n.ID == node {
			return r.RemoveVolume(vol)
		}
	}
	return nil
}
