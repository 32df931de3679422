package access

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Enable turns etcd's authentication on, once: it creates the root user
// (no password: the server authenticates with a certificate whose Common
// Name is root) and its role, then enables auth. admin must be allowed to
// do that: any client before auth is on, root after. It reports whether it
// enabled auth now.
func Enable(ctx context.Context, admin *facts.Store) (bool, error) {
	cli := admin.Client
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("access: auth status: %w", err)
	}
	if st.Enabled {
		return false, nil
	}
	if _, err := cli.RoleAdd(ctx, Root); err != nil && !isErr(err, rpctypes.ErrRoleAlreadyExist) {
		return false, fmt.Errorf("access: add role root: %w", err)
	}
	if _, err := cli.UserAddWithOptions(ctx, Root, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil && !isErr(err, rpctypes.ErrUserAlreadyExist) {
		return false, fmt.Errorf("access: add user root: %w", err)
	}
	if _, err := cli.UserGrantRole(ctx, Root, Root); err != nil {
		return false, fmt.Errorf("access: grant root its role: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return false, fmt.Errorf("access: enable auth: %w", err)
	}
	return true, nil
}

// Changes counts what one Sync did.
type Changes struct {
	UsersAdded, UsersRemoved int
	RolesAdded, RolesRemoved int
	Granted, Revoked         int // permissions, and roles given to or taken from users
}

// Zero reports whether Sync changed nothing.
func (c Changes) Zero() bool { return c == Changes{} }

func (c Changes) String() string {
	return fmt.Sprintf("users +%d -%d, roles +%d -%d, grants +%d -%d",
		c.UsersAdded, c.UsersRemoved, c.RolesAdded, c.RolesRemoved, c.Granted, c.Revoked)
}

// Sync makes etcd's users and roles what the plan says. It reads what etcd
// has and changes only the difference, so running it again changes nothing.
// It removes users that are principals (Kind accepts their name) but are not
// in the plan, and roles named RolePrefix... that are not; the root user and
// role, and users and roles of other names, are left alone. A principal
// whose rules are gone loses its access here: its user is deleted.
// A role's permissions are changed before users get it, and a user gets
// its new roles before it loses old ones: a principal keeps what both
// plans grant it throughout.
// admin must be etcd's root user: only root manages users and roles.
func Sync(ctx context.Context, admin *facts.Store, plan Plan) (Changes, error) {
	cli := admin.Client
	var ch Changes
	roles, err := cli.RoleList(ctx)
	if err != nil {
		return ch, fmt.Errorf("access: list roles: %w", err)
	}
	have := map[string]bool{}
	for _, r := range roles.Roles {
		have[r] = true
	}
	for _, role := range sortedKeys(plan.Roles) {
		if !have[role] {
			if _, err := cli.RoleAdd(ctx, role); err != nil {
				return ch, fmt.Errorf("access: add role %s: %w", role, err)
			}
			ch.RolesAdded++
		}
		if err := syncRole(ctx, cli, role, !have[role], plan.Roles[role], &ch); err != nil {
			return ch, err
		}
	}

	users, err := cli.UserList(ctx)
	if err != nil {
		return ch, fmt.Errorf("access: list users: %w", err)
	}
	haveUser := map[string]bool{}
	for _, u := range users.Users {
		haveUser[u] = true
	}
	for _, user := range sortedKeys(plan.Users) {
		var cur []string
		if !haveUser[user] {
			if _, err := cli.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
				return ch, fmt.Errorf("access: add user %s: %w", user, err)
			}
			ch.UsersAdded++
		} else {
			got, err := cli.UserGet(ctx, user)
			if err != nil {
				return ch, fmt.Errorf("access: read user %s: %w", user, err)
			}
			cur = got.Roles
		}
		want := map[string]bool{}
		for _, r := range plan.Users[user] {
			want[r] = true
		}
		had := map[string]bool{}
		for _, r := range cur {
			had[r] = true
		}
		// New roles first: a principal moving from one role to another
		// never holds neither.
		for _, r := range plan.Users[user] {
			if !had[r] {
				if _, err := cli.UserGrantRole(ctx, user, r); err != nil {
					return ch, fmt.Errorf("access: give role %s to %s: %w", r, user, err)
				}
				ch.Granted++
			}
		}
		for _, r := range cur {
			if !want[r] {
				if _, err := cli.UserRevokeRole(ctx, user, r); err != nil {
					return ch, fmt.Errorf("access: take role %s from %s: %w", r, user, err)
				}
				ch.Revoked++
			}
		}
	}
	for _, u := range users.Users {
		if _, ok := plan.Users[u]; ok || u == Root {
			continue
		}
		if _, _, err := Kind(u); err != nil {
			continue // not ours
		}
		if _, err := cli.UserDelete(ctx, u); err != nil && !isErr(err, rpctypes.ErrUserNotFound) {
			return ch, fmt.Errorf("access: delete user %s: %w", u, err)
		}
		ch.UsersRemoved++
	}
	for _, r := range roles.Roles {
		if _, ok := plan.Roles[r]; ok || !strings.HasPrefix(r, RolePrefix) {
			continue
		}
		if _, err := cli.RoleDelete(ctx, r); err != nil && !isErr(err, rpctypes.ErrRoleNotFound) {
			return ch, fmt.Errorf("access: delete role %s: %w", r, err)
		}
		ch.RolesRemoved++
	}
	return ch, nil
}

func syncRole(ctx context.Context, cli *clientv3.Client, role string, fresh bool, want []Perm, ch *Changes) error {
	type rng struct{ k, e string }
	have := map[rng]clientv3.PermissionType{}
	if !fresh {
		got, err := cli.RoleGet(ctx, role)
		if err != nil {
			return fmt.Errorf("access: read role %s: %w", role, err)
		}
		for _, p := range got.Perm {
			have[rng{string(p.Key), string(p.RangeEnd)}] = clientv3.PermissionType(p.PermType)
		}
	}
	wanted := map[rng]bool{}
	for _, p := range want {
		r := rng{p.Key, p.End}
		wanted[r] = true
		if t, ok := have[r]; ok && t == p.Type {
			continue
		}
		// Granting a range the role holds already replaces its type.
		if _, err := cli.RoleGrantPermission(ctx, role, p.Key, p.End, p.Type); err != nil {
			return fmt.Errorf("access: grant %s [%s, %s) to %s: %w", permName(p.Type), p.Key, p.End, role, err)
		}
		ch.Granted++
	}
	for r := range have {
		if wanted[r] {
			continue
		}
		if _, err := cli.RoleRevokePermission(ctx, role, r.k, r.e); err != nil {
			return fmt.Errorf("access: revoke [%s, %s) from %s: %w", r.k, r.e, role, err)
		}
		ch.Revoked++
	}
	return nil
}

func permName(t clientv3.PermissionType) string {
	switch t {
	case clientv3.PermissionType(clientv3.PermRead):
		return "read"
	case clientv3.PermissionType(clientv3.PermWrite):
		return "write"
	}
	return "readwrite"
}

func isErr(err, want error) bool { return rpctypes.Error(err) == want || err == want }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
