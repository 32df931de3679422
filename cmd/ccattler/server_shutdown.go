package main

import (
	"context"
	"log/slog"
	"time"
)

// stillWaitingEvery is how often a shutdown step that has not ended says
// what the server is still waiting for.
const stillWaitingEvery = 2 * time.Second

// awaitStop runs stop, one step of a shutdown, and while it has not
// returned logs every stillWaitingEvery what the server is waiting for: a
// shutdown that takes long says where it is held.
func awaitStop(log *slog.Logger, what string, stop func()) {
	done := make(chan struct{})
	go func() { defer close(done); stop() }()
	start := time.Now()
	t := time.NewTicker(stillWaitingEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			log.Warn("shutting down: still waiting", "for", what, "waited", time.Since(start).Round(time.Millisecond))
		}
	}
}

// logStopped logs "server stopped", and how long the shutdown took, when
// the server returns after ctx ended; runServer defers it first, so that
// it runs after every other step.
func logStopped(ctx context.Context, log *slog.Logger) func() {
	began := make(chan time.Time, 1)
	notYet := context.AfterFunc(ctx, func() { began <- time.Now() })
	return func() {
		if notYet() {
			return // ctx did not end: the error returned says why the server did
		}
		log.Info("server stopped", "took", time.Since(<-began).Round(time.Millisecond))
	}
}
