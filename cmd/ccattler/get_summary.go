package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/ccattler/ccattler/facts"
)

// The services table counts each service's running, healthy and updated
// instances. Counted here, that is a read of every instance fact: about 19
// keys an instance, 30-60 s at 100,000 instances. The engine keeps the
// counts instead, in observed/service/{name}/summary (policies/summaries.hcl),
// so `get services` reads the services' own trees and those summaries. It
// reads everything, as before, when a service has no summary: a server
// older than the summary, a rule set without it, or a service applied
// since the engine's last round.

// serviceTrees are what the services table reads when every service has a
// summary.
var serviceTrees = []string{"desired/", "effective/", "observed/service/"}

// instanceCounts are one service's counts in the services table.
type instanceCounts struct {
	Running  int `json:"running"`
	Healthy  int `json:"healthy"`
	Updated  int `json:"updated"`
	Unplaced int `json:"unplaced"` // pending, without a placement
}

// load reads what the view shows: for services, their trees and summaries
// when every service has one; for volumes and endpoints, the trees their
// tables read (getView.trees).
func (v *getView) load(ctx context.Context, s *facts.Store) (*world, error) {
	switch v.kind {
	case "services":
		w, err := loadServices(ctx, s)
		if err != nil || w != nil {
			return w, err
		}
		return loadWorld(ctx, s)
	case "nodes":
		return loadNodes(ctx, s)
	case "instances":
		if v.service != "" || v.node != "" {
			return loadInstancesOf(ctx, s, v)
		}
	}
	return loadTrees(ctx, s, v.trees())
}

// loadInstancesOf reads what the instances table shows when --service or
// --node narrows it, at one revision: desired/ (the services' labels, for
// -l), and the instances the filter may show (readInstancesOf).
func loadInstancesOf(ctx context.Context, s *facts.Store, v *getView) (*world, error) {
	w := newWorld()
	if err := w.read(ctx, s, "desired/", nil); err != nil {
		return nil, err
	}
	if err := w.readInstancesOf(ctx, s, v.service, v.node, v.names); err != nil {
		return nil, err
	}
	w.index()
	return w, nil
}

// readInstancesOf adds, at the world's revision, the placements and
// instance facts of the instances of service, or, when service is "", of
// those reported on or placed on node, and of those named. Every instance
// fact is listed, but only theirs are parsed: at 100,000 instances, a
// hundred of a million. The filters compare what the tables show
// (display): the same comparison here keeps every instance they may pass.
func (w *world) readInstancesOf(ctx context.Context, s *facts.Store, service, node string, names []string) error {
	placed, rev, err := s.List(ctx, "placement/instance/", w.rev)
	if err != nil {
		return err
	}
	w.rev = rev
	inst, _, err := s.List(ctx, "observed/instance/", w.rev)
	if err != nil {
		return err
	}
	shown := map[string]bool{}
	for _, n := range names {
		shown[n] = true
	}
	ids := make([]string, len(inst))
	for i, f := range inst {
		id, attr := instanceKey(f.Key)
		ids[i] = id
		if service != "" && attr == "service" && display(f.Value) == service ||
			service == "" && attr == "node" && display(f.Value) == node {
			shown[id] = true
		}
	}
	placedIDs := make([]string, len(placed))
	for i, f := range placed {
		placedIDs[i] = strings.TrimPrefix(f.Key, "placement/instance/")
		if service == "" && display(f.Value) == node {
			shown[placedIDs[i]] = true
		}
	}
	for i, f := range placed {
		if shown[placedIDs[i]] {
			w.add(s.Schema, f)
		}
	}
	for i, f := range inst {
		if shown[ids[i]] {
			w.add(s.Schema, f)
		}
	}
	return nil
}

// loadNodes reads what the nodes table shows, at one revision: the nodes'
// facts, the placements, and of the instance facts (about ten an
// instance) the two a node's count reads, the instance's node and state.
// The others are listed too, and dropped before they are parsed: at
// 100,000 instances that is most of what the table cost.
func loadNodes(ctx context.Context, s *facts.Store) (*world, error) {
	w := newWorld()
	for _, tree := range []string{"observed/node/", "placement/instance/"} {
		if err := w.read(ctx, s, tree, nil); err != nil {
			return nil, err
		}
	}
	if err := w.read(ctx, s, "observed/instance/", countedOnNode); err != nil {
		return nil, err
	}
	w.index()
	return w, nil
}

// countedOnNode reports whether key is an instance's node or state:
// observed/instance/{id}/node or observed/instance/{id}/state.
func countedOnNode(key string) bool {
	_, attr := instanceKey(key)
	return attr == "node" || attr == "state"
}

// instanceKey splits observed/instance/{id}/{attr} into the id and the
// rest ("" for the instance's own key), without the schema's parse.
func instanceKey(key string) (id, attr string) {
	id, attr, _ = strings.Cut(strings.TrimPrefix(key, "observed/instance/"), "/")
	return id, attr
}

// trees are the key trees v's table reads. The instance facts are most of
// a large cluster's (about 19 keys an instance, and an hour of stopped
// ones): the volumes table reads none, the endpoints table only for
// --node (an endpoint's node is its instance's).
func (v *getView) trees() []string {
	switch {
	case v.kind == "volumes":
		return []string{"desired/", "observed/volume/"}
	case v.kind == "endpoints" && v.node == "":
		return []string{"desired/", "endpoint/"}
	}
	return getTrees
}

// nameTrees are the trees that name a kind's objects, for completion: the
// services' own trees, the nodes', the volumes' and the endpoints' (their
// services).
func nameTrees(kind string) []string {
	switch kind {
	case "services":
		return serviceTrees
	case "nodes":
		return []string{"observed/node/"}
	}
	return (&getView{kind: kind}).trees()
}

// loadServices reads the services' trees at one revision and takes their
// instance counts from the summaries; nil when a service has none (or one
// breaking the schema, which the engine repairs).
func loadServices(ctx context.Context, s *facts.Store) (*world, error) {
	w, err := loadTrees(ctx, s, serviceTrees)
	if err != nil {
		return nil, err
	}
	w.summaries = map[string]instanceCounts{}
	for _, n := range w.ids["desired.service"] {
		raw, ok := w.raw["observed.service.summary"][n]
		var c instanceCounts
		if !ok || json.Unmarshal(raw, &c) != nil {
			return nil, nil
		}
		// The rules read an image that breaks the schema as absent, the
		// table as a value no instance reports: count as the table does.
		if len(w.invalidUnder("desired/service/"+n+"/image")) > 0 {
			return nil, nil
		}
		w.summaries[n] = c
	}
	return w, nil
}

// counts returns each service's running, healthy, updated and unplaced
// instances: from the summaries when the world was loaded with them, else
// counted from the instance facts.
func (w *world) counts() map[string]instanceCounts {
	if w.summaries != nil {
		return w.summaries
	}
	// As policies/summaries.hcl counts them: keep the two the same.
	out := map[string]instanceCounts{}
	for id, svc := range w.attrs["observed.instance.service"] {
		c := out[svc]
		state := w.get("observed.instance.state", id)
		if state == "running" {
			c.Running++
		}
		if state == "pending" && w.get("placement.instance", id) == "" {
			c.Unplaced++ // instances.hcl's waiting
		}
		if w.get("observed.instance.health", id) == "healthy" {
			c.Healthy++
			if state == "running" && w.get("observed.instance.image", id) == w.get("desired.service.image", svc) {
				c.Updated++
			}
		}
		out[svc] = c
	}
	return out
}
