// Package access turns the principals of auth/{principal}/rules into etcd
// users, roles and prefix permissions, so that the trust boundary of the
// key schema — a node may report, never decide — is enforced by etcd
// itself. A principal is the Common Name of a client certificate
// (facts/pki); etcd, started with --client-cert-auth, takes it as the user.
//
//	rules, _ := access.Parse("node:node-2", raw) // one auth/{principal}/rules value
//	plan := access.Want(root, principals, services)
//	_ = access.Sync(ctx, admin, plan)            // users, roles, permissions
//
// A rule value is a JSON list of grants, relative to the fact root:
//
//	[{"prefix": "observed/node/{node}/", "access": "readwrite"},
//	 {"key": "lease/node/{node}", "access": "readwrite"},
//	 {"prefix": "desired/service/", "access": "read"}]
//
// Templates: {node} is a node principal's id (node:node-2 -> node-2),
// {user} a user principal's name, {service} every service under
// desired/service/ (kept in sync as services come and go). A prefix that
// starts with "/" is an absolute etcd key (the election and reload-control
// prefixes live beside the fact root, not under it).
package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Access is what a grant allows.
type Access string

const (
	Read      Access = "read"
	Write     Access = "write"
	ReadWrite Access = "readwrite"
)

// Grant is one key or key prefix a principal may read or write.
type Grant struct {
	Prefix string `json:"prefix,omitempty"`
	Key    string `json:"key,omitempty"`
	Access Access `json:"access"`
}

// Rules are a principal's grants: the value of auth/{principal}/rules.
type Rules []Grant

// Kinds of principal, by the part of the name before the colon.
const (
	KindUser    = "user"    // user:{name}; user:admin is the administrator
	KindNode    = "node"    // node:{id}; node:{prefix}* is a fleet of simulated nodes
	KindEngine  = "engine"  // the rules engine
	KindAuditor = "auditor" // reads everything, writes nothing
)

// Admin is the administrator's principal.
const Admin = "user:admin"

// Root is etcd's superuser: the server itself, for managing users and roles.
// It has no auth/ rules; it is not a principal of the trust table.
const Root = "root"

// ErrPrincipal is returned for a name that is no principal.
var ErrPrincipal = errors.New("access: not a principal")

// Kind returns the principal's kind and the name after its colon.
func Kind(principal string) (kind, name string, err error) {
	switch principal {
	case KindEngine, KindAuditor:
		return principal, "", nil
	}
	kind, name, ok := strings.Cut(principal, ":")
	if !ok || (kind != KindUser && kind != KindNode) {
		return "", "", fmt.Errorf("%w: %q (expected user:{name}, node:{id}, engine or auditor)", ErrPrincipal, principal)
	}
	fleet := kind == KindNode && strings.HasSuffix(name, "*")
	id := strings.TrimSuffix(name, "*")
	if id == "" && !fleet {
		return "", "", fmt.Errorf("%w: %q has an empty name", ErrPrincipal, principal)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return "", "", fmt.Errorf("%w: %q: %q is not allowed in a name (lowercase letters, digits, -_.)", ErrPrincipal, principal, r)
		}
	}
	if len(principal) > 128 {
		return "", "", fmt.Errorf("%w: %.24q...: longer than 128 bytes", ErrPrincipal, principal)
	}
	return kind, name, nil
}

// Parse decodes and checks one principal's rules.
func Parse(principal string, raw []byte) (Rules, error) {
	if _, _, err := Kind(principal); err != nil {
		return nil, err
	}
	var r Rules
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("auth/%s/rules: %v; expected a JSON list such as [{\"prefix\": \"desired/\", \"access\": \"readwrite\"}]", principal, err)
	}
	for i, gr := range r {
		if err := gr.check(); err != nil {
			return nil, fmt.Errorf("auth/%s/rules[%d]: %w", principal, i, err)
		}
	}
	return r, nil
}

func (gr Grant) check() error {
	switch gr.Access {
	case Read, Write, ReadWrite:
	default:
		return fmt.Errorf("access %q: expected read, write or readwrite", gr.Access)
	}
	switch {
	case gr.Prefix != "" && gr.Key != "":
		return errors.New("both prefix and key: give one")
	case gr.Prefix == "" && gr.Key == "":
		return errors.New(`neither prefix nor key: give one (the whole root is "prefix": "*")`)
	case gr.Key == "*" || strings.Contains(strings.TrimPrefix(gr.Prefix, "*"), "*"):
		return fmt.Errorf("%q: * stands alone, for the whole root, and only as a prefix", gr.Prefix+gr.Key)
	}
	p := gr.Prefix + gr.Key
	if strings.Count(p, "{") != strings.Count(p, "}") {
		return fmt.Errorf("%q: unbalanced { }", p)
	}
	for rest := p; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		switch v := rest[i+1 : i+j]; v {
		case "node", "user", "service":
		default:
			return fmt.Errorf("%q: unknown template {%s} (expected {node}, {user} or {service})", p, v)
		}
		rest = rest[i+j+1:]
	}
	return nil
}

// Encode renders rules as the value of auth/{principal}/rules.
func (r Rules) Encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a list of plain structs always encodes
	}
	return b
}

// Builtins are the principals written at bootstrap, with their rules.
// leaderPrefix and ctlPrefix are the absolute election and reload-control
// prefixes beside the root. writes is what the engine's rule principals
// may write (rules.Principals), relative to the root.
func Builtins(ctlPrefix, leaderPrefix string, engineWrites []string) map[string]Rules {
	engine := Rules{{Prefix: "*", Access: Read}, {Prefix: "event/", Access: ReadWrite},
		{Prefix: leaderPrefix, Access: ReadWrite}, {Prefix: ctlPrefix, Access: ReadWrite}}
	for _, w := range uniqueSorted(engineWrites) {
		if !engine.Covers(w) { // observed/node/ lies in observed/ already
			engine = append(engine, Grant{Prefix: w, Access: ReadWrite})
		}
	}
	return map[string]Rules{
		KindEngine:  engine,
		KindAuditor: {{Prefix: "*", Access: Read}, {Prefix: leaderPrefix, Access: Read}, {Prefix: ctlPrefix, Access: Read}},
		Admin: {{Prefix: "*", Access: Read}, {Prefix: "desired/", Access: ReadWrite}, {Prefix: "intent/user/", Access: ReadWrite}, {Prefix: "event/", Access: Write},
			{Prefix: "auth/", Access: ReadWrite}, {Prefix: "schema/", Access: ReadWrite}, {Prefix: "sim/", Access: ReadWrite},
			{Prefix: leaderPrefix, Access: Read}, {Prefix: ctlPrefix, Access: ReadWrite}},
	}
}

// Default returns the rules a new principal of its kind gets
// (`ccattler auth add`): a user writes what it declares and reads all but
// auth/; a node reports about itself and reads what it runs.
func Default(principal, ctlPrefix, leaderPrefix string) (Rules, error) {
	kind, _, err := Kind(principal)
	if err != nil {
		return nil, err
	}
	switch kind {
	case KindUser:
		if principal == Admin {
			return Builtins(ctlPrefix, leaderPrefix, nil)[Admin], nil
		}
		// event/: an apply's record is committed with its writes, so that
		// `why` reaches the user's apply (docs/security.md: what a user's
		// record is worth).
		r := Rules{{Prefix: "desired/", Access: ReadWrite}, {Prefix: "intent/user/", Access: ReadWrite}, {Prefix: "sim/", Access: ReadWrite},
			{Prefix: "event/", Access: Write},
			{Prefix: leaderPrefix, Access: Read}, {Prefix: ctlPrefix + "status/", Access: Read}}
		for _, t := range []string{"effective/", "observed/", "placement/", "endpoint/", "intent/", "lease/", "event/", "schema/"} {
			r = append(r, Grant{Prefix: t, Access: Read})
		}
		return r, nil
	case KindNode:
		r := Rules{
			{Key: "observed/node/{node}", Access: ReadWrite},
			{Prefix: "observed/node/{node}/", Access: ReadWrite},
			{Key: "lease/node/{node}", Access: ReadWrite},
			// Instances and volumes are not keyed by node: the schema
			// leaves no narrower grant. The engine believes a report only
			// for an instance placed on the reporting node.
			{Prefix: "observed/instance/", Access: ReadWrite},
			{Prefix: "observed/volume/", Access: ReadWrite},
			{Prefix: "observed/service/{service}/metrics/", Access: Write},
			{Prefix: "desired/service/", Access: Read},
			{Prefix: "desired/volume/", Access: Read},
			// Its own placements: the entries the engine writes under
			// placement/node/{node}/ with each placement (not every
			// placement of the cluster).
			{Prefix: "placement/node/{node}/", Access: Read},
			{Prefix: "schema/", Access: Read},
			{Prefix: "sim/", Access: Read}, // a simulated node follows its knobs
		}
		return r, nil
	default:
		return Builtins(ctlPrefix, leaderPrefix, nil)[kind], nil
	}
}

// Writes are the prefixes (relative to the root, "" for all of it) the
// rules let the principal write, templates left as they are.
func (r Rules) Writes() []string {
	var out []string
	for _, gr := range r {
		if gr.Access == Read {
			continue
		}
		p := gr.Prefix + gr.Key
		if p == "*" {
			p = ""
		}
		out = append(out, p)
	}
	return out
}

// Covers reports whether the rules let the principal write every key under
// prefix (relative to the root): some write grant without a template is a
// prefix of it.
func (r Rules) Covers(prefix string) bool {
	for _, gr := range r {
		if gr.Access == Read || gr.Prefix == "" || strings.Contains(gr.Prefix, "{") {
			continue
		}
		if gr.Prefix == "*" || strings.HasPrefix(prefix, gr.Prefix) {
			return true
		}
	}
	return false
}

func uniqueSorted(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
