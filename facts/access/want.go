package access

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RolePrefix starts the name of every etcd role this package manages; Sync
// never touches a role without it, nor the root user and role.
const RolePrefix = "ccattler"

// Perm is one etcd permission: the range [Key, End) (End empty: Key alone).
type Perm struct {
	Key, End string
	Type     clientv3.PermissionType
}

// Plan is what etcd's users and roles should be.
type Plan struct {
	Users map[string][]string // user -> its roles
	Roles map[string][]Perm   // role -> its permissions, sorted
}

// Want computes the plan for principals (name -> rules) under root, with
// {service} expanded to services. Each principal gets a role of its own for
// the grants that name it ({node}, {user}) and shares a role with every
// principal whose other grants are the same: a thousand nodes share one
// role that lists every service's metrics prefix, instead of a thousand
// copies of it kept in sync.
func Want(root string, principals map[string]Rules, services []string) Plan {
	p := Plan{Users: map[string][]string{}, Roles: map[string][]Perm{}}
	for name, rules := range principals {
		_, id, err := Kind(name)
		if err != nil {
			continue
		}
		var own, shared []Perm
		var common Rules // the grants behind shared, which name the role
		for _, gr := range rules {
			personal := strings.Contains(gr.Prefix+gr.Key, "{node}") || strings.Contains(gr.Prefix+gr.Key, "{user}")
			perms := expand(root, gr, id, services)
			if personal {
				own = append(own, perms...)
			} else {
				shared = append(shared, perms...)
				common = append(common, gr)
			}
		}
		var roles []string
		if own = normalize(own); len(own) > 0 {
			r := RolePrefix + ":" + name
			p.Roles[r] = own
			roles = append(roles, r)
		}
		// Named by its grants, not by what they expand to, so that a
		// service coming or going changes the role's permissions, never
		// which role a principal holds.
		if shared = normalize(shared); len(shared) > 0 {
			r := RolePrefix + "-" + digest(common)
			p.Roles[r] = shared
			roles = append(roles, r)
		}
		sort.Strings(roles)
		p.Users[name] = roles
	}
	return p
}

// expand renders one grant as etcd permissions.
func expand(root string, gr Grant, id string, services []string) []Perm {
	typ := clientv3.PermissionType(clientv3.PermReadWrite)
	switch gr.Access {
	case Read:
		typ = clientv3.PermissionType(clientv3.PermRead)
	case Write:
		typ = clientv3.PermissionType(clientv3.PermWrite)
	}
	pattern, isPrefix := gr.Prefix, true
	if gr.Key != "" {
		pattern, isPrefix = gr.Key, false
	}
	// A fleet's {node} is a prefix of every node id it holds, so a key
	// that names it becomes a prefix.
	if fleet := strings.TrimSuffix(id, "*"); fleet != id && strings.Contains(pattern, "{node}") {
		id, isPrefix = fleet, true
		if i := strings.Index(pattern, "{node}"); i >= 0 {
			pattern = pattern[:i+len("{node}")] // what follows {node} cannot narrow a prefix of ids
		}
	}
	pattern = strings.ReplaceAll(strings.ReplaceAll(pattern, "{node}", id), "{user}", id)
	names := []string{""}
	if strings.Contains(pattern, "{service}") {
		names = services
	}
	var out []Perm
	for _, svc := range names {
		k := strings.ReplaceAll(pattern, "{service}", svc)
		switch {
		case k == "*":
			k = root
		case !strings.HasPrefix(k, "/"):
			k = root + k
		}
		if isPrefix {
			out = append(out, Perm{Key: k, End: clientv3.GetPrefixRangeEnd(k), Type: typ})
		} else {
			out = append(out, Perm{Key: k, Type: typ})
		}
	}
	return out
}

// normalize sorts permissions and merges those of one range into one type.
func normalize(ps []Perm) []Perm {
	type rng struct{ k, e string }
	m := map[rng]clientv3.PermissionType{}
	for _, p := range ps {
		r := rng{p.Key, p.End}
		if t, ok := m[r]; ok && t != p.Type {
			m[r] = clientv3.PermissionType(clientv3.PermReadWrite)
		} else {
			m[r] = p.Type
		}
	}
	out := make([]Perm, 0, len(m))
	for r, t := range m {
		out = append(out, Perm{Key: r.k, End: r.e, Type: t})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].End < out[j].End
	})
	return out
}

func digest(rules Rules) string {
	lines := make([]string, len(rules))
	for i, gr := range rules {
		lines[i] = gr.Prefix + "\x00" + gr.Key + "\x00" + string(gr.Access)
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
