package faults

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// Partitions. A process under test runs in a network namespace the test
// creates (ip netns add), which has nothing but its own loopback: no
// address other than 127.0.0.1, no veth, no route out. What it may reach
// outside is bridged by the test, port by port: a listener on 127.0.0.1:PORT
// inside one namespace forwarding to 127.0.0.1:PORT in another (the root
// one, or a server's). A partition cuts the bridges of a namespace: from
// then on what is sent either way is dropped (connections hang, as across
// a partitioned network, rather than fail), and a connection opened
// meanwhile is held, never forwarded. Healing closes every connection that
// lived through the cut, so both ends reconnect, and forwards again.
//
// Nothing of the machine's own network is touched: the namespaces and
// their loopbacks are the test's, and are deleted with it.

// netns is a network namespace made by the test, its loopback up.
type netns struct {
	name string
	path string // /var/run/netns/{name}, for setns
}

var netnsSeq atomic.Int64

// newNetns creates a namespace, deleted when the test ends. Where
// namespaces cannot be made (no CAP_SYS_ADMIN, no ip), the test is
// skipped with the reason, and fails in CI.
func newNetns(t *testing.T) *netns {
	t.Helper()
	name := fmt.Sprintf("ccf-%d-%d", os.Getpid(), netnsSeq.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		why := fmt.Sprintf("cannot create a network namespace (ip netns add %s: %v: %s): partitions need root with CAP_SYS_ADMIN and iproute2", name, err, strings.TrimSpace(string(out)))
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link set lo up: %v: %s", name, err, out)
	}
	return &netns{name: name, path: "/var/run/netns/" + name}
}

// in runs fn on an OS thread inside ns (nil: the root namespace, where
// every other thread of the test is). A socket made by fn stays in ns.
func (ns *netns) in(fn func() error) error {
	if ns == nil {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open(ns.path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns.name, err)
			return
		}
		err = fn()
		if setns(self) != nil {
			// The thread stays locked: it ends with this goroutine rather
			// than run anything else in the wrong namespace.
			errc <- err
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

// link is a set of bridges that a partition cuts together: all of one
// namespace's.
type link struct {
	mu  sync.Mutex
	cut bool // guarded by mu
}

// bridge forwards 127.0.0.1:port of one namespace to the same address of
// another, unless one of its links is cut.
type bridge struct {
	from, to *netns
	port     int
	links    []*link
	l        net.Listener

	mu    sync.Mutex     // guards conns
	conns map[*pair]bool // open forwarded connections
}

// pair is one forwarded connection; broken once it lived through a cut.
type pair struct {
	in, out net.Conn // out is nil while it is held
	broken  atomic.Bool
}

func (p *pair) close() {
	p.in.Close()
	if p.out != nil {
		p.out.Close()
	}
}

// net is the test's bridged network: every bridge, closed with the test.
type network struct {
	t       *testing.T
	bridges []*bridge
}

func newNetwork(t *testing.T) *network {
	n := &network{t: t}
	t.Cleanup(func() {
		for _, b := range n.bridges {
			b.l.Close()
			b.mu.Lock()
			for p := range b.conns {
				p.close()
			}
			b.mu.Unlock()
		}
	})
	return n
}

// bridge makes from's 127.0.0.1:port lead to to's, cut with any of links.
func (n *network) bridge(from, to *netns, port int, links ...*link) {
	n.t.Helper()
	b := &bridge{from: from, to: to, port: port, links: links, conns: map[*pair]bool{}}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if err := from.in(func() (err error) { b.l, err = net.Listen("tcp", addr); return err }); err != nil {
		n.t.Fatalf("bridge %s in %s: %v", addr, from.label(), err)
	}
	n.bridges = append(n.bridges, b)
	go b.serve(addr)
}

func (ns *netns) label() string {
	if ns == nil {
		return "the root namespace"
	}
	return "namespace " + ns.name
}

func (b *bridge) isCut() bool {
	for _, l := range b.links {
		l.mu.Lock()
		cut := l.cut
		l.mu.Unlock()
		if cut {
			return true
		}
	}
	return false
}

func (b *bridge) serve(addr string) {
	for {
		in, err := b.l.Accept()
		if err != nil {
			return // closed with the test
		}
		p := &pair{in: in}
		b.mu.Lock()
		b.conns[p] = true
		b.mu.Unlock()
		go b.forward(p, addr)
	}
}

func (b *bridge) forward(p *pair, addr string) {
	defer func() {
		p.close()
		b.mu.Lock()
		delete(b.conns, p)
		b.mu.Unlock()
	}()
	if b.isCut() {
		// Opened across a partition: held, what it sends dropped, until
		// the heal closes it.
		p.broken.Store(true)
		_, _ = io.Copy(io.Discard, p.in)
		return
	}
	var out net.Conn
	if err := b.to.in(func() (err error) { out, err = net.Dial("tcp", addr); return err }); err != nil {
		return // nothing listens there (yet, or any more): as a refused connection
	}
	b.mu.Lock()
	p.out = out
	b.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 && !p.broken.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go pipe(out, p.in)
	go pipe(p.in, out)
	<-done
}

// partition cuts l: every connection across its bridges hangs from now on.
func (n *network) partition(l *link) {
	l.mu.Lock()
	l.cut = true
	l.mu.Unlock()
	for _, b := range n.bridges {
		if !b.has(l) {
			continue
		}
		b.mu.Lock()
		for p := range b.conns {
			p.broken.Store(true)
		}
		b.mu.Unlock()
	}
}

// heal ends the cut of l: the connections that lived through it are
// closed (their streams lost what was dropped), new ones are forwarded.
func (n *network) heal(l *link) {
	l.mu.Lock()
	l.cut = false
	l.mu.Unlock()
	for _, b := range n.bridges {
		if !b.has(l) || b.isCut() {
			continue
		}
		b.mu.Lock()
		for p := range b.conns {
			if p.broken.Load() {
				p.close()
			}
		}
		b.mu.Unlock()
	}
}

func (b *bridge) has(l *link) bool {
	for _, x := range b.links {
		if x == l {
			return true
		}
	}
	return false
}

// portOf is the port of a URL such as https://127.0.0.1:2379.
func portOf(t *testing.T, u string) int {
	t.Helper()
	i := strings.LastIndexByte(u, ':')
	p, err := strconv.Atoi(u[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("no port in %q", u)
	}
	return p
}

// isolation puts each server of a cluster in its own namespace: server i
// reaches server j's client and peer ports only through bridges of links[i]
// and links[j], and the root namespace (the test, the agents) reaches
// server i's client port through one of links[i].
type isolation struct {
	net   *network
	ns    []*netns
	links []*link
}

func newIsolation(t *testing.T, servers int) *isolation {
	iso := &isolation{net: newNetwork(t)}
	for range servers {
		iso.ns = append(iso.ns, newNetns(t))
		iso.links = append(iso.links, &link{})
	}
	return iso
}

// isolate bridges the members, whose (client, peer) ports are ports, and
// makes each run in its namespace.
func (iso *isolation) isolate(ms []*member, ports [][2]int) {
	for i, m := range ms {
		m.netns = iso.ns[i].name
		iso.net.bridge(nil, iso.ns[i], ports[i][0], iso.links[i])
		for j := range ms {
			if j == i {
				continue
			}
			for _, p := range ports[j] {
				iso.net.bridge(iso.ns[i], iso.ns[j], p, iso.links[i], iso.links[j])
			}
		}
	}
}
