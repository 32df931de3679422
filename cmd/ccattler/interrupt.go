package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// stopOnInterrupt returns a context that ends at the first SIGINT or
// SIGTERM, for server, dev and agent to stop gracefully. A second signal
// while they stop ends the process at once with exit code 1, saying so on
// w: a stop that waits on an etcd that no longer answers (a cluster's
// last server, a frozen member) is cut short as users expect of a second
// Ctrl-C. What the process keeps is safe to lose so: etcd's data is in
// its write-ahead log, and containers keep running without their agent.
func stopOnInterrupt(parent context.Context, w io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			cancel(fmt.Errorf("%v signal received; another stops at once", s))
		case <-done:
			return
		}
		select {
		case s := <-sig:
			fmt.Fprintf(w, "ccattler: %v signal received again: stopping at once, exit code 1\n", s)
			os.Exit(1)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		close(done)
		cancel(context.Canceled)
	}
}
