// Package etcdtest starts a real embedded etcd for tests: a single member on
// free loopback ports with its data in a temporary directory.
//
//	e := etcdtest.Start(t)
//	store := e.Store(t) // a *facts.Store under a fresh root, closed at cleanup
//
// StartSecure runs it as `ccattler server` does (TLS, client certificates,
// etcd auth); Admit gives principals their default grants and dials as one.
// PutRaw, Compact and WritesBetween act on etcd where Store's methods do
// not on purpose: a write past the schema, a compaction, every write of the
// whole keyspace.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/ccattler/ccattler/facts/pki"
	"google.golang.org/grpc"
)

// Etcd is a running embedded member owned by a test.
type Etcd struct {
	*embedded.Etcd
	Cfg embedded.Config
	CA  *pki.CA // StartSecure's CA; nil for a plain member
}

// handedOut holds the ports FreePort returned in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a loopback port that was free a moment ago and that it
// has not returned before in this process: the kernel may offer a port
// just closed again, and a member given the same port for its client and
// its peer URL never starts.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		handedOut.Lock()
		fresh := !handedOut.ports[p]
		handedOut.ports[p] = true
		handedOut.Unlock()
		if fresh {
			return p
		}
	}
	t.Fatalf("free port: the kernel offered 100 ports handed out before")
	return 0
}

// Start starts an embedded etcd that is closed when the test ends.
func Start(t testing.TB) *Etcd {
	t.Helper()
	cfg := embedded.NewConfig()
	cfg.DataDir = t.TempDir()
	cfg.ClientURL = fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	cfg.PeerURL = fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	cfg.Solo = true
	e := &Etcd{Cfg: cfg}
	e.Restart(t)
	t.Cleanup(func() { e.Etcd.Close() })
	return e
}

// Restart starts the member again with the same data and ports (after Close).
func (e *Etcd) Restart(t testing.TB) {
	t.Helper()
	var err error
	for i := 0; i < 50; i++ { // the old listener may take a moment to release its port
		e.Etcd, err = embedded.Start(e.Cfg)
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("start embedded etcd: %v", err)
}

// Store dials the member; the store is closed when the test ends.
func (e *Etcd) Store(t testing.TB) *facts.Store {
	t.Helper()
	return e.StoreWith(t)
}

// StoreWith is Store with extra gRPC dial options: a test's interceptor in
// front of the real member, a fake of an etcd that fails some requests.
func (e *Etcd) StoreWith(t testing.TB, opts ...grpc.DialOption) *facts.Store {
	t.Helper()
	s, err := facts.Dial(context.Background(), facts.StoreConfig{Endpoints: e.Endpoints(), Schema: facts.NewSchema(), DialOptions: opts})
	if err != nil {
		t.Fatalf("dial embedded etcd: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
