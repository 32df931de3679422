package etcdtest

import (
	"context"
	"strings"
	"testing"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
)

// Admit gives principals their default rules (access.Default, what `ccattler
// auth add` writes) as etcd users and roles of the secure member, with
// {service} expanded to services, and returns a store dialed as the first:
// the principal's real RBAC role, as a running cluster enforces it. Admit
// again to change the set; a principal not named loses its access.
func (e *Etcd) Admit(t testing.TB, services []string, principals ...string) *facts.Store {
	t.Helper()
	root := e.StoreAs(t, access.Root)
	base := strings.TrimSuffix(root.Root, "/")
	ps := map[string]access.Rules{}
	for _, p := range principals {
		r, err := access.Default(p, base+"-ctl/", base+"-leader/")
		if err != nil {
			t.Fatal(err)
		}
		ps[p] = r
	}
	if _, err := access.Sync(context.Background(), root, access.Want(root.Root, ps, services)); err != nil {
		t.Fatalf("admit %v: %v", principals, err)
	}
	return e.StoreAs(t, principals[0])
}
