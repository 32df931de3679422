package facts_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/etcdtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// withoutRangeStream dials the secure member as root through a client whose
// first times RangeStream calls (all of them: -1) fail with refusal: as an
// etcd older than 3.7 answers them (Unimplemented), as a member that lost
// its leader does, as etcd fails a read during which its users and roles
// changed. A fake of the server's answer, in front of the real server;
// calls counts the RangeStream calls it refused.
func withoutRangeStream(t *testing.T, e *etcdtest.Etcd, refusal error, times int64, calls *atomic.Int64) *facts.Store {
	t.Helper()
	var refused atomic.Int64 // by this client
	refuse := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if strings.HasSuffix(method, "/RangeStream") && (times < 0 || refused.Load() < times) {
			refused.Add(1)
			calls.Add(1)
			return nil, refusal
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	return e.StoreAsWith(t, access.Root, grpc.WithChainStreamInterceptor(refuse))
}

// List returns every fact under a prefix, in key order, with its value and
// revisions, at one revision however many chunks the stream takes, and the
// same again at that revision after later writes; through etcd's
// RangeStream and, from a server without it, in pages. A compacted
// revision is ErrCompacted and a prefix the principal may not read is
// ErrPermissionDenied either way.
func TestListIsOneSnapshot(t *testing.T) {
	e := etcdtest.StartSecure(t)
	root := e.StoreAs(t, access.Root)
	var refused atomic.Int64
	old := withoutRangeStream(t, e, status.Error(codes.Unimplemented, "unknown method RangeStream for service etcdserverpb.KV"), -1, &refused)
	down := withoutRangeStream(t, e, rpctypes.ErrGRPCLeaderChanged, -1, &refused)
	authChanged := withoutRangeStream(t, e, rpctypes.ErrGRPCAuthOldRevision, 2, &refused)
	ctx := context.Background()

	// 12,000 placements: more than two of the pages an older etcd is read
	// in (5,000), and dozens of the stream's chunks (its first holds 10).
	const n = 12000
	var ops []facts.Op
	for i := range n {
		ops = append(ops, facts.Put(facts.NodePlacement("node-1", fmt.Sprintf("%05x", i)), []byte(fmt.Sprintf(`"node-%d"`, i%7))))
	}
	for ch := range slices.Chunk(ops, 4000) {
		if _, err := root.Commit(ctx, facts.Txn{Ops: ch}); err != nil {
			t.Fatal(err)
		}
	}
	at := put(t, root, facts.NodePlacement("node-1", "0002a"), `"node-x"`, facts.NodeState("node-1"), `"alive"`)

	// Written while the list runs: none of it may show in the list, at
	// whatever revision the list pinned.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if _, err := root.Commit(ctx, facts.Txn{Ops: []facts.Op{
				facts.Put(facts.NodePlacement("node-1", fmt.Sprintf("%05x", i*50)), []byte(`"node-moved"`)),
				facts.Put(facts.NodePlacement("node-1", fmt.Sprintf("f%05x", i)), []byte(`"node-new"`))}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	during, rev, err := root.List(ctx, "placement/node/node-1/", 0)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	if rev < at {
		t.Fatalf("List read at revision %d, before the last write it must see (%d)", rev, at)
	}
	for _, f := range during {
		if f.ModRevision > rev {
			t.Fatalf("List at %d holds %s written at %d: not one snapshot", rev, f.Key, f.ModRevision)
		}
	}

	check := func(name string, s *facts.Store, rev int64, want []facts.Fact) {
		t.Helper()
		got, r, err := s.List(ctx, "placement/node/node-1/", rev)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r != rev {
			t.Errorf("%s: read at %d, asked for %d", name, r, rev)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d facts, want %d", name, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Key != w.Key || string(g.Value) != string(w.Value) || g.ModRevision != w.ModRevision || g.CreateRevision != w.CreateRevision {
				t.Fatalf("%s: fact %d is %s=%s@%d/%d, want %s=%s@%d/%d", name, i, g.Key, g.Value, g.ModRevision, g.CreateRevision, w.Key, w.Value, w.ModRevision, w.CreateRevision)
			}
		}
	}
	// At revision at, exactly the facts written by then, built from the
	// writes themselves: the 12,000 in key order, one of them rewritten.
	var want []facts.Fact
	for _, op := range ops {
		f, ok, err := root.GetAt(ctx, op.Key, at)
		if err != nil || !ok {
			t.Fatalf("GetAt %s: %v, %v", op.Key, ok, err)
		}
		want = append(want, f)
	}
	if string(want[42].Value) != `"node-x"` || want[42].ModRevision != at {
		t.Fatalf("GetAt gave %s=%s@%d, want the rewrite at %d", want[42].Key, want[42].Value, want[42].ModRevision, at)
	}
	check("stream at a past revision", root, at, want)
	check("pages at a past revision", old, at, want)
	check("stream at the revision it pinned", root, rev, during)
	check("pages at the stream's revision", old, rev, during)
	if refused.Load() != 2 {
		t.Errorf("an older etcd was asked for RangeStream %d times in two lists, want once each", refused.Load())
	}
	check("pages when the stream's member is unavailable", down, at, want)
	if refused.Load() != 5 {
		t.Errorf("a member without a leader was asked for RangeStream %d times in a list, want three", refused.Load()-2)
	}
	check("streamed again after two reads spanned a change of roles", authChanged, at, want)
	if refused.Load() != 7 {
		t.Errorf("RangeStream was refused %d times for a change of roles, want the two the fake refuses", refused.Load()-5)
	}
	latest, lrev, err := root.List(ctx, "placement/node/node-1/", 0)
	if err != nil || len(latest) != n+200 || lrev < rev {
		t.Errorf("List of the latest: %d facts at %d (%v); want %d at or after %d", len(latest), lrev, err, n+200, rev)
	}
	if empty, erev, err := root.List(ctx, "nothing/here/", 0); err != nil || len(empty) != 0 || erev < lrev {
		t.Errorf("List of an empty prefix = %d facts at %d, %v; want none at the current revision", len(empty), erev, err)
	}

	if err := root.Compact(ctx, lrev); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*facts.Store{"stream": root, "pages": old, "pages after unavailable": down, "stream after a change of roles": authChanged} {
		if _, _, err := s.List(ctx, "placement/node/node-1/", at); !errors.Is(err, facts.ErrCompacted) || !strings.Contains(err.Error(), "placement/node/node-1/") {
			t.Errorf("%s: List at compacted revision %d: %v; want ErrCompacted naming the prefix", name, at, err)
		}
	}

	node := e.Admit(t, []string{"web"}, "node:node-1")
	if fs, _, err := node.List(ctx, "placement/node/node-1/", 0); err != nil || len(fs) != n+200 {
		t.Errorf("a node's List of its placements = %d facts, %v; want %d", len(fs), err, n+200)
	}
	if _, _, err := node.List(ctx, "placement/node/", 0); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a node's List of every node's placements = %v; want ErrPermissionDenied", err)
	}
	if _, _, err := node.List(ctx, "auth/", 0); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("a node's List of auth/ = %v; want ErrPermissionDenied", err)
	}

	// etcd ends a stream at the deadline, and may do so a moment before
	// the client's context says it passed: still a deadline to callers.
	late := withoutRangeStream(t, e, status.Error(codes.DeadlineExceeded, "context deadline exceeded"), -1, &refused)
	if _, _, err := late.List(ctx, "placement/node/node-1/", 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("List ended by etcd at the deadline = %v; want context.DeadlineExceeded", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := root.List(cctx, "placement/node/node-1/", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("List with a cancelled context = %v; want context.Canceled", err)
	}
}

// BenchmarkList lists 200,000 placements and then the 600,000 facts of a
// larger prefix (three an instance), each list at one revision: Store.List
// through etcd's RangeStream, and as the baseline in the same run the pages
// of 5,000 it read before (and still reads from an etcd without
// RangeStream), each of which made etcd walk the rest of the range.
//
//	go test ./facts -run '^$' -bench BenchmarkList -benchtime 2x
func BenchmarkList(b *testing.B) {
	s := etcdtest.Start(b).Store(b)
	ctx := context.Background()
	var ops []facts.Op
	for i := range 200000 {
		id := fmt.Sprintf("%06x", i)
		ops = append(ops,
			facts.Put(facts.Placement(id), []byte(`"node-17"`)),
			facts.Put("observed/instance/"+id+"/state", []byte(`"running"`)),
			facts.Put("observed/instance/"+id+"/health", []byte(`"healthy"`)),
			facts.Put("observed/instance/"+id+"/service", []byte(`"svc-00042"`)))
	}
	for ch := range slices.Chunk(ops, 16000) {
		if _, err := s.Commit(ctx, facts.Txn{Ops: ch}); err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range []struct {
		prefix string
		n      int
	}{{"placement/instance/", 200000}, {"observed/instance/", 600000}} {
		b.Run("prefix="+p.prefix, func(b *testing.B) {
			var stream, paged time.Duration
			for range b.N {
				t0 := time.Now()
				got, rev, err := s.List(ctx, p.prefix, 0)
				t1 := time.Now()
				old := listInPages(b, s, p.prefix, rev)
				stream, paged = stream+t1.Sub(t0), paged+time.Since(t1)
				if err != nil || len(got) != p.n || old != p.n {
					b.Fatalf("listed %d (%v), in pages %d; want %d", len(got), err, old, p.n)
				}
			}
			b.ReportMetric(float64(stream.Milliseconds())/float64(b.N), "ms/list")
			b.ReportMetric(float64(paged.Milliseconds())/float64(b.N), "baseline-ms/list")
			b.ReportMetric(paged.Seconds()/stream.Seconds(), "x-faster")
		})
	}
}

// listInPages is Store.List as it was: pages of 5,000 keys, each a Get
// with a limit at the first page's revision.
func listInPages(b *testing.B, s *facts.Store, prefix string, rev int64) int {
	abs := s.Abs(prefix)
	end := clientv3.GetPrefixRangeEnd(abs)
	from, n := abs, 0
	for {
		resp, err := s.Client.Get(context.Background(), from, clientv3.WithRange(end), clientv3.WithLimit(5000), clientv3.WithRev(rev))
		if err != nil {
			b.Fatal(err)
		}
		n += len(resp.Kvs)
		if !resp.More || len(resp.Kvs) == 0 {
			return n
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}
