package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/spf13/cobra"
)

// Every client command runs within --timeout: without a quorum etcd's
// members accept a request and never answer it (the connection check is a
// serializable read that one member answers alone), so without a deadline
// `ccattler apply` would wait forever. The commands that run until stopped
// have none; `rules reload` keeps its own --timeout.
var untimed = map[string]bool{
	"ccattler server":                true,
	"ccattler agent":                 true,
	"ccattler dev":                   true,
	"ccattler bench":                 true,
	"ccattler bench weigh":           true, // local work on a large file
	"ccattler facts watch":           true,
	"ccattler rules reload":          true,
	"ccattler rules test":            true, // local work only, however long
	"ccattler rules check":           true,
	"ccattler rules plan":            true,
	"ccattler diff":                  true, // rules plan's local work
	"ccattler cluster snapshot save": true, // as long as the keyspace takes to copy
}

// withDeadline gives cmd's context the --timeout deadline, unless cmd
// runs until stopped (untimed, or events --follow).
func withDeadline(cmd *cobra.Command) {
	if untimed[cmd.CommandPath()] || g.timeout <= 0 {
		return
	}
	for _, name := range []string{"follow", "watch"} { // events --follow, get --watch
		if f := cmd.Flags().Lookup(name); f != nil && f.Value.String() == "true" {
			return
		}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
	g.cancelDeadline = cancel
	g.deadlined = true
	cmd.SetContext(ctx)
}

// explainDeadline turns a command's deadline passing into what it means:
// the cluster did not answer in time, most likely for want of a quorum.
// A write in flight then may or may not have been made; every write of the
// project's commands is one transaction, so it was made whole or not at all.
func explainDeadline(err error) error {
	if err == nil || !g.deadlined || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, facts.ErrUnreachable) {
		return err // a dial that got no answer says so itself
	}
	eps := g.dialled // as dialled: https:// when TLS was found
	if len(eps) == 0 {
		eps = g.endpoints()
	}
	return exitError{code: 1, err: fmt.Errorf("etcd at %s did not answer within --timeout %s: a majority of its members may be down or cut off (no quorum); "+
		"a write sent is one transaction, made whole or not at all: check with ccattler get, or run the command again: %w",
		strings.Join(eps, ","), g.timeout, err)}
}
