package facts

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultRoot is the prefix every CCattler key lives under.
const DefaultRoot = "/ccattler/"

// ErrConflict is returned by Store.Commit when a compare failed: a fact the
// transaction was guarded by has changed since it was read.
var ErrConflict = errors.New("facts: transaction compare failed")

// Fact is one key with its value and revisions. Key is relative to the root.
type Fact struct {
	Key            string
	Value          []byte
	ModRevision    int64
	CreateRevision int64
	// Lease is the etcd lease the key is attached to (0: none). Liveness
	// rests on it, never on the key's text: a key put without a lease never
	// expires (FactType.Leased).
	Lease int64
	// Invalid says why the fact breaks the schema ("": it does not), as a
	// Table finds it on Put: rules treat such a fact as absent.
	Invalid string
	// decoded is the slot of the Table entry the fact was read from
	// (Decoded), nil for a fact not read from a Table.
	decoded *atomic.Pointer[Decoded]
}

// Store is a thin layer over an etcd client that keeps every key under Root
// and validates every value it writes against Schema.
type Store struct {
	// Client is the etcd connection, for facts and its packages only
	// (access manages etcd's users and roles with it, etcdtest writes past
	// the schema): the rest of the project acts through Store's methods
	// (TestOnlyFactsImportsTheEtcdClient).
	Client *clientv3.Client
	Root   string
	Schema *Schema
}

// StoreConfig says how to reach etcd.
type StoreConfig struct {
	Endpoints   []string
	Root        string        // default DefaultRoot
	DialTimeout time.Duration // how long to wait for the first connection; default 5s
	Schema      *Schema       // default Default
	// TLS, when set, is used for every connection (the endpoints are then
	// https); its client certificate's Common Name is the principal etcd
	// authorizes. Nil: plain connections.
	TLS *tls.Config
	// DialOptions are added to the gRPC connection's: interceptors, such
	// as the fakes tests put in front of a real etcd to make a kind of
	// request fail (etcdtest.Etcd.StoreWith).
	DialOptions []grpc.DialOption
}

// Dial connects to etcd and checks that it answers within DialTimeout, so that
// an unreachable etcd is an error naming the endpoints rather than a hang.
func Dial(ctx context.Context, cfg StoreConfig) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("facts: no etcd endpoints given")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          cfg.Endpoints,
		DialTimeout:        cfg.DialTimeout,
		MaxCallSendMsgSize: 64 << 20,
		Logger:             zap.NewNop(),
		TLS:                cfg.TLS,
		// A member that is frozen or cut off keeps its connections open
		// and answers nothing: keepalive pings find it, so that requests
		// move to another endpoint rather than wait on it.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		DialOptions:          cfg.DialOptions,
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	// Any answer will do, a refusal too: a principal may read nothing
	// outside its own trees.
	if _, err := cli.Get(cctx, "health-check", clientv3.WithSerializable(), clientv3.WithCountOnly()); err != nil &&
		!errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied) {
		cli.Close()
		if errors.Is(rpctypes.Error(err), rpctypes.ErrUserEmpty) || errors.Is(rpctypes.Error(err), rpctypes.ErrInvalidAuthMgmt) {
			return nil, fmt.Errorf("etcd at %s requires a client certificate: give --cert and --key (or --tls-dir), see docs/security.md: %w",
				strings.Join(cfg.Endpoints, ","), err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		eps := strings.Join(cfg.Endpoints, ",")
		if cfg.TLS == nil && strings.Contains(eps, "https://") {
			return nil, fmt.Errorf("etcd at %s did not answer within %s: an https endpoint needs the cluster's CA and a client certificate (--tls-dir, or --cacert/--cert/--key; docs/security.md): %w: %w",
				eps, cfg.DialTimeout, ErrUnreachable, err)
		}
		if cfg.TLS == nil {
			if ep, ok := servesTLS(cfg.Endpoints); ok {
				return nil, fmt.Errorf("etcd at %s serves TLS, and a plain http client gets no answer from it: give %s and the cluster's certificates (--tls-dir, or run beside ccattler-data; docs/security.md): %w: %w",
					ep, "https://"+strings.TrimPrefix(ep, "http://"), ErrUnreachable, err)
			}
		}
		return nil, fmt.Errorf("etcd at %s did not answer within %s (is it running? set --etcd or CCATTLER_ETCD): %w: %w",
			eps, cfg.DialTimeout, ErrUnreachable, err)
	}
	return NewStore(cli, cfg.Root, cfg.Schema), nil
}

// ErrUnreachable is wrapped by Dial's error when etcd did not answer: the
// error says why already, deadline or not.
var ErrUnreachable = errors.New("no answer")

// servesTLS reports the first http:// endpoint that answers a TLS
// handshake: a secure server dialled without https, whose gRPC
// connection then fails without a word. The probe sends no credential and
// no request; it only reads which protocol the port speaks.
func servesTLS(endpoints []string) (string, bool) {
	for _, ep := range endpoints {
		host, ok := strings.CutPrefix(ep, "http://")
		if !ok {
			continue
		}
		d := &net.Dialer{Timeout: 500 * time.Millisecond}
		conn, err := tls.DialWithDialer(d, "tcp", host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a probe of the protocol, nothing is trusted or sent
		if err == nil {
			conn.Close()
			return ep, true
		}
		var alert tls.AlertError
		if errors.As(err, &alert) { // a TLS server that refused the handshake is a TLS server
			return ep, true
		}
	}
	return "", false
}

// NewStore wraps an existing client.
func NewStore(cli *clientv3.Client, root string, schema *Schema) *Store {
	if root == "" {
		root = DefaultRoot
	}
	if !strings.HasSuffix(root, "/") {
		root += "/"
	}
	if schema == nil {
		schema = Default
	}
	return &Store{Client: cli, Root: root, Schema: schema}
}

// Close closes the client.
func (s *Store) Close() error { return s.Client.Close() }

// Abs returns the etcd key of a key relative to the root.
func (s *Store) Abs(key string) string { return s.Root + key }

// Rel strips the root from an etcd key.
func (s *Store) Rel(key string) string { return strings.TrimPrefix(key, s.Root) }

// listPage is the number of keys fetched per range request when listing
// from an etcd without RangeStream (listPaged).
const listPage = 5000

// listStreamAttempts is how many times List streams a range that failed for
// a passing reason (retryable) before it reads it in pages.
const listStreamAttempts = 3

// List returns every fact whose key starts with prefix (relative to the root),
// in key order, as of revision rev (0: the latest), and the revision it read:
// one consistent snapshot however large the prefix.
//
// It reads through etcd's RangeStream (etcd 3.7), which sends the range in
// chunks at one revision and counts nothing. A range read in pages of Get
// costs etcd a walk of the whole rest of the range for every page (a Get
// with a limit still counts every key after it), so a list of the million
// keys under observed/ at 100,000 instances took tens of seconds
// (BENCHMARKS.md, "Lists of a large prefix streamed"). The client retries
// a Get that failed for a passing reason, not a stream: List streams again
// (listStreamAttempts), then reads in pages; from an etcd without
// RangeStream it reads in pages at once.
func (s *Store) List(ctx context.Context, prefix string, rev int64) ([]Fact, int64, error) {
	abs := s.Abs(prefix)
	end := clientv3.GetPrefixRangeEnd(abs)
	var err error
	for attempt := range listStreamAttempts {
		var out []Fact
		var read int64
		if out, read, err = s.listStream(ctx, abs, end, rev); err == nil {
			return out, read, nil
		}
		if ctx.Err() != nil || !retryable(err) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("list %s: %w", abs, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	if ctx.Err() == nil && (codeOf(err) == codes.Unimplemented || retryable(err)) {
		return s.listPaged(ctx, abs, end, rev)
	}
	return nil, 0, fmt.Errorf("list %s: %w", abs, contextErr(err))
}

// contextErr makes a stream's DeadlineExceeded or Canceled status an error
// that is the context's too, as the client makes a Get's: etcd may end the
// stream at the deadline a moment before the client's context says so,
// and callers tell a deadline by errors.Is (a command's --timeout says
// then that etcd did not answer, and why it may not have).
func contextErr(err error) error {
	switch {
	case codeOf(err) == codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	case codeOf(err) == codes.Canceled && !errors.Is(err, context.Canceled):
		return fmt.Errorf("%w (%w)", context.Canceled, err)
	}
	return err
}

// listStream is one RangeStream of [abs, end) at rev (0: the latest).
func (s *Store) listStream(ctx context.Context, abs, end string, rev int64) ([]Fact, int64, error) {
	opts := []clientv3.OpOption{clientv3.WithRange(end)}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	stream, err := s.Client.GetStream(ctx, abs, opts...)
	if err != nil {
		return nil, 0, err
	}
	// The chunks are kept apart and joined once at the end: appending a
	// million facts one by one copied the growing slice over and over
	// (a second of `get instances` at 100,000 instances).
	var chunks [][]Fact
	n := 0
	read := int64(0)
	// Every chunk is read, also after an error, so that the client's
	// goroutine that feeds the channel ends: the error is its last.
	for resp := range stream {
		if e := resp.Err(); e != nil {
			if err == nil {
				err = e
			}
			continue
		}
		if err != nil {
			continue
		}
		chunk := make([]Fact, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			chunk[i] = s.factOf(kv)
		}
		chunks = append(chunks, chunk)
		n += len(chunk)
		if resp.Header != nil && resp.Header.Revision > 0 {
			read = resp.Header.Revision // the last chunk's: the revision the stream was pinned to
		}
	}
	switch {
	case err != nil:
		return nil, 0, err
	case rev == 0 && read == 0:
		return nil, 0, errors.New("the stream ended without its last chunk")
	case rev > 0:
		read = rev
	}
	switch {
	case n == 0:
		return nil, read, nil
	case len(chunks) == 1:
		return chunks[0], read, nil
	}
	out := make([]Fact, 0, n)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out, read, nil
}

// retryable reports whether a read failed for a reason that passes: the
// member is unavailable or has no leader (Unavailable), or etcd's users
// and roles changed while it was read (ErrAuthOldRevision: etcd fails a
// read that spanned such a change). The client retries a Get for these.
func retryable(err error) bool {
	return codeOf(err) == codes.Unavailable || errors.Is(err, rpctypes.ErrAuthOldRevision)
}

// codeOf is the gRPC code of an error from the etcd client, which turns
// the statuses of etcd's own errors into rpctypes.EtcdError ("leader
// changed", "no leader": Unavailable) and leaves the others statuses.
func codeOf(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	return status.Code(err)
}

// listPaged is List in pages of listPage keys, each a Get at the first
// page's revision.
func (s *Store) listPaged(ctx context.Context, abs, end string, rev int64) ([]Fact, int64, error) {
	var out []Fact
	from := abs
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.Client.Get(ctx, from, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("list %s: %w", abs, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			out = append(out, s.factOf(kv))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// factOf is an etcd key-value as the fact it holds, its key relative to
// the root.
func (s *Store) factOf(kv *mvccpb.KeyValue) Fact {
	return Fact{Key: s.Rel(string(kv.Key)), Value: kv.Value, ModRevision: kv.ModRevision, CreateRevision: kv.CreateRevision, Lease: kv.Lease}
}

// Get returns one fact; ok is false if the key does not exist.
func (s *Store) Get(ctx context.Context, key string) (Fact, bool, error) {
	resp, err := s.Client.Get(ctx, s.Abs(key))
	if err != nil {
		return Fact{}, false, fmt.Errorf("get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return Fact{}, false, nil
	}
	return s.factOf(resp.Kvs[0]), true, nil
}

// Op is one write of a transaction: a put (Value != nil) or a delete.
type Op struct {
	Key    string
	Value  []byte // nil: delete
	Lease  LeaseID
	Prefix bool // delete every key under Key (deletes only)
}

// Put is a put of raw JSON bytes.
func Put(key string, value []byte) Op { return Op{Key: key, Value: value} }

// Delete is a delete of one key.
func Delete(key string) Op { return Op{Key: key} }

// Cond guards a transaction: the key's ModRevision must equal Rev
// (0: the key must not exist). With Prefix, every key under Key must
// (Rev 0: no key under it exists).
type Cond struct {
	Key    string
	Rev    int64
	Prefix bool
}

// Txn is a guarded batch of writes.
type Txn struct {
	If  []Cond
	Ops []Op
	// Guard holds extra compares on absolute etcd keys, which may lie outside
	// the root: the engine guards every commit with its leader key this way,
	// so that a deposed leader's transaction fails.
	Guard []Guard
	// Checked says the caller has validated every put against this store's
	// schema already (the engine checks each firing when it stages it and
	// builds its records itself), so Commit does not decode them again.
	Checked bool
}

// Commit validates every put against the schema and writes the batch in one
// etcd transaction. It returns the revision of the write, or ErrConflict
// (wrapped) if a condition failed; nothing is written then.
func (s *Store) Commit(ctx context.Context, t Txn) (int64, error) {
	cmps := make([]clientv3.Cmp, 0, len(t.If))
	for _, c := range t.If {
		cmp := clientv3.Compare(clientv3.ModRevision(s.Abs(c.Key)), "=", c.Rev)
		if c.Prefix {
			cmp = cmp.WithPrefix()
		}
		cmps = append(cmps, cmp)
	}
	for _, g := range t.Guard {
		cmps = append(cmps, g.cmp)
	}
	ops := make([]clientv3.Op, 0, len(t.Ops))
	for _, o := range t.Ops {
		if o.Value == nil {
			var opts []clientv3.OpOption
			if o.Prefix {
				opts = append(opts, clientv3.WithPrefix())
			}
			ops = append(ops, clientv3.OpDelete(s.Abs(o.Key), opts...))
			continue
		}
		if !t.Checked {
			if _, err := s.Schema.Validate(o.Key, o.Value); err != nil {
				return 0, err
			}
		}
		var opts []clientv3.OpOption
		if o.Lease != 0 {
			opts = append(opts, clientv3.WithLease(o.Lease))
		}
		ops = append(ops, clientv3.OpPut(s.Abs(o.Key), string(o.Value), opts...))
	}
	resp, err := s.Client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("commit %d writes: %w", len(ops), err)
	}
	if !resp.Succeeded {
		return resp.Header.Revision, fmt.Errorf("%w (%d conditions)", ErrConflict, len(cmps))
	}
	return resp.Header.Revision, nil
}

// PutValue encodes v for key (validating it) and writes it unconditionally.
func (s *Store) PutValue(ctx context.Context, key string, v any) (int64, error) {
	raw, err := s.Schema.Encode(key, v)
	if err != nil {
		return 0, err
	}
	return s.Commit(ctx, Txn{Ops: []Op{Put(key, raw)}})
}

// Watch streams the changes under prefix (relative to the root) from revision
// rev on. See clientv3.Watcher.Watch: the channel closes when ctx is done or
// the watch breaks; a compacted start revision yields a response whose Err()
// is rpctypes.ErrCompacted.
func (s *Store) Watch(ctx context.Context, prefix string, rev int64) clientv3.WatchChan {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	return s.Client.Watch(clientv3.WithRequireLeader(ctx), s.Abs(prefix), opts...)
}

// Grant creates a lease of the given TTL.
func (s *Store) Grant(ctx context.Context, ttl time.Duration) (LeaseID, error) {
	resp, err := s.Client.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return 0, fmt.Errorf("grant lease of %s: %w", ttl, err)
	}
	return resp.ID, nil
}

// KeepAlive keeps a lease alive until ctx is done; see clientv3.Lease.KeepAlive.
func (s *Store) KeepAlive(ctx context.Context, id LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	return s.Client.KeepAlive(ctx, id)
}

// Revoke ends a lease and deletes the keys attached to it.
func (s *Store) Revoke(ctx context.Context, id LeaseID) error {
	_, err := s.Client.Revoke(ctx, id)
	return err
}

// RegisterBuiltins writes schema/{fact-type} for every built-in type that is
// missing or different, in one transaction; running it again writes nothing.
func (s *Store) RegisterBuiltins(ctx context.Context) (int, error) {
	have, _, err := s.List(ctx, "schema/", 0)
	if err != nil {
		return 0, err
	}
	cur := map[string]string{}
	for _, f := range have {
		cur[f.Key] = string(f.Value)
	}
	var ops []Op
	for _, t := range s.Schema.Types() {
		if !t.Builtin {
			continue
		}
		k := SchemaKey(t.Name)
		v := EncodeRegistration(RegistrationOf(t))
		if cur[k] != string(v) {
			ops = append(ops, Put(k, v))
		}
	}
	if len(ops) == 0 {
		return 0, nil
	}
	_, err = s.Commit(ctx, Txn{Ops: ops})
	return len(ops), err
}

// LoadPlugins registers every schema/ entry that is not yet known to the
// store's schema. Entries that fail are returned as one joined error; the
// valid ones are registered anyway.
func (s *Store) LoadPlugins(ctx context.Context) error {
	have, _, err := s.List(ctx, "schema/", 0)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range have {
		name := strings.TrimPrefix(f.Key, "schema/")
		if t, ok := s.Schema.Type(name); ok && t.Builtin {
			continue
		}
		if err := s.Schema.RegisterFrom(name, f.Value); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
