package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// sameSignalWithin is how soon after the first a second signal is taken
// for the same one, delivered twice: a wrapper such as timeout(1) relays
// the SIGTERM its own process group also got, and pkill -f may match both.
const sameSignalWithin = 250 * time.Millisecond

// stopOnInterrupt returns a context that ends at the first SIGINT or
// SIGTERM, for the commands that run until stopped (server, agent, dev,
// bench and the watches) to stop gracefully. A second signal while they
// stop (more than sameSignalWithin after the first) ends the process at
// once with exit code 1, saying so on w: a stop that waits on an etcd
// that no longer answers (a cluster's last server, a frozen member) is
// cut short as users expect of a second Ctrl-C. What the process keeps is
// safe to lose so: etcd's data is in its write-ahead log, and containers
// keep running without their agent. What must not be left behind, as
// dev's context in the client configuration and dev's and bench's
// temporary data, is undone by forced first, in order.
func stopOnInterrupt(parent context.Context, w io.Writer, forced ...func()) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	// The handler stays until the process exits: a signal that came late,
	// while the command's last deferred steps run (dev's forced ones among
	// them), must not find the default action, which kills at once.
	go func() {
		s := <-sig
		first := time.Now()
		cancel(fmt.Errorf("%v signal received; another stops at once", s))
		for s := range sig {
			if time.Since(first) < sameSignalWithin {
				continue
			}
			fmt.Fprintf(w, "ccattler: %v signal received again: stopping at once, exit code 1\n", s)
			for _, f := range forced {
				f()
			}
			os.Exit(1)
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// unlessInterrupted returns err, or nil when ctx ended: a failure while
// starting that a stop cut short was on purpose, so it is logged rather
// than reported (exit code 0).
func unlessInterrupted(ctx context.Context, log *slog.Logger, err error) error {
	if err != nil && ctx.Err() != nil {
		log.Info("interrupted while starting", "err", err)
		return nil
	}
	return err
}
