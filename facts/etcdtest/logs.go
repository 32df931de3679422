package etcdtest

import (
	"bytes"
	"log/slog"
	"sync"
)

// Logs is a log sink the goroutines of what a test follows etcd with (a
// mirror, a feed, knobs) write to while the test reads it:
//
//	var logs etcdtest.Logs
//	m := facts.NewMirrorOf(store, logs.Logger(), "sim/")
//	... strings.Contains(logs.String(), `may not watch`)
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Logger returns a text logger writing to l.
func (l *Logs) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
