// Package facts is CCattler's ground floor: the key schema, the etcd store
// and the in-memory mirror the engine reads.
//
// Every fact is one etcd key under a root (default /ccattler/) with a JSON
// value. The Schema knows every key form of the seed schema
// (desired/service/{name}/image, observed/instance/{instance-id}/state, ...)
// and the type of its values; plugin types registered under schema/ extend it
// at run time. Keys are built with typed constructors and parsed back:
//
//	key := facts.InstanceState("a8f31")          // "observed/instance/a8f31/state"
//	k, _ := facts.Default.Parse(key)             // k.Type.Name == "observed.instance.state"
//	raw, _ := facts.Default.Encode(key, "running") // `"running"`, validated
//
// A Store is a thin layer over go.etcd.io/etcd/client/v3 that validates
// every value it writes; a Txn is a batch of Ops guarded by ModRevision
// conditions. A Mirror lists at revision R, watches from R+1 and relists on
// compaction, keeping an indexed Table (by key order, fact type, path
// variable and string value) that readers query through View, and publishing
// ordered change batches to Subscriptions. The engine mirrors the whole
// root; a node's agent, whose principal may read only some trees, mirrors
// just those prefixes (NewMirrorOf).
//
// Package facts/embedded runs an etcd member in-process for `ccattler
// server` with no --etcd, and package etcdtest one for tests (with the raw
// writes, compactions and keyspace watches tests need beside Store's
// methods); facts itself is only a client, so that its readers link no etcd
// server.
package facts
