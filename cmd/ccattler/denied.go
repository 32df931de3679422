package main

import (
	"fmt"

	"github.com/ccattler/ccattler/facts/access"
)

// explainDenied adds to etcd's bare "permission denied" which principal
// the command acted as and where its grants are seen: a node's
// certificate used for an apply, or a principal revoked since, otherwise
// reads as a fault of the cluster.
func explainDenied(err error) error {
	if err == nil || g.actedAs == "" || !access.IsDenied(err) {
		return err
	}
	return exitError{code: 1, err: fmt.Errorf("%w: acting as %s, whose grants do not cover this key (or which was revoked); "+
		"ccattler auth list shows every principal's grants, --identity or --cert acts as another", err, g.actedAs)}
}
