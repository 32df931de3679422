package embedded

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Config configures the etcd member that `ccattler server` runs
// in-process when no --etcd is given: a cluster of its own, or one member
// of a cluster of servers (InitialCluster).
type Config struct {
	DataDir    string // where etcd keeps its data; survives restarts
	ClientURL  string // e.g. http://127.0.0.1:2379
	PeerURL    string // e.g. http://127.0.0.1:2380
	Name       string // member name
	MaxTxnOps  uint   // raised from etcd's 128 so that plans commit in large batches
	MaxRequest uint   // bytes; raised from etcd's 1.5 MiB for the same reason
	// QuotaBackend is the size in bytes the backend file may reach before
	// etcd takes no more puts (its NOSPACE alarm): raised from etcd's
	// 2 GiB, which 100,000 instances on 3 nodes reached while scaling
	// back, to 8 GiB, the most etcd's documentation suggests. 0: etcd's.
	QuotaBackend int64
	StartWithin  time.Duration // how long to wait for the member to be ready
	LogLevel     string        // etcd's own log level; "" keeps it silent
	// Auto compaction is left at etcd's default except where a test sets it.
	AutoCompactionRetention string
	// SnapshotCount is how many applied entries trigger a raft snapshot,
	// and SnapshotCatchUpEntries how many a member of a cluster keeps
	// after one, for a slow follower; a member alone has none and keeps
	// at most soloCatchUpEntries. etcd keeps the entries in between in
	// memory: at its defaults (10,000 and 5,000) every engine and agent
	// transaction of a 100,000-instance apply, GiBs; at 1,000 and 100
	// still every transaction of a 10,000-instance apply (about 400, 56 to
	// 75 MB of the server's heap once converged).
	SnapshotCount          uint64
	SnapshotCatchUpEntries uint64
	// InitialCluster, when set, makes the member one of a cluster:
	// name=peerURL pairs, comma-separated, this member's own among them
	// (etcd's --initial-cluster). Empty: a cluster of this member alone.
	// It is read on the member's first start only; later starts find the
	// cluster in DataDir.
	InitialCluster string
	// ClusterState is "new" when the members of InitialCluster bootstrap
	// together, "existing" when this member joins a running cluster that
	// has already added it (ccattler cluster member add). Empty: new.
	ClusterState string
	// ClusterToken tells clusters apart at bootstrap (etcd's
	// --initial-cluster-token); members of one cluster share it.
	ClusterToken string
	// Solo marks a member that never has peers (ccattler dev, the bench,
	// tests): its Raft ticks every 20ms, so it elects itself within 100ms
	// of starting. A member that may be joined keeps etcd's defaults (a
	// 100ms tick, a 1s election timeout), which its peers share, and takes
	// up to a second to elect itself alone.
	Solo bool
	// TLS, when set, makes the member serve TLS on its client and peer
	// URLs (https) and require every client and peer to present a
	// certificate signed by the CA; etcd then takes a client certificate's
	// Common Name as its user (--client-cert-auth). Nil: plain http.
	TLS *TLS
}

// TLS names the files of a member's TLS: its serving certificate and
// key, and the CA its clients' and peers' certificates must be signed by.
type TLS struct {
	CAFile, CertFile, KeyFile string
}

// soloCatchUpEntries is how many entries a member alone keeps after a
// snapshot: it has no follower to catch up, and a member added later
// starts from a snapshot in any case.
const soloCatchUpEntries = 10

// NewConfig returns the defaults of `ccattler server`.
func NewConfig() Config {
	return Config{
		DataDir:      "ccattler-data",
		ClientURL:    "http://127.0.0.1:2379",
		PeerURL:      "http://127.0.0.1:2380",
		Name:         "ccattler",
		MaxTxnOps:    16384,
		MaxRequest:   32 << 20,
		QuotaBackend: 8 << 30,
		StartWithin:  60 * time.Second,
		// A snapshot costs little here (the v3 data is in the backend, the
		// snapshot file holds only the membership); the entries kept cost
		// memory, up to a transaction's MaxRequest bytes each.
		SnapshotCount:          100,
		SnapshotCatchUpEntries: 100,
	}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	if c.DataDir == "" {
		return errors.New("embedded etcd: --data-dir is empty")
	}
	for name, u := range map[string]string{"--listen-client": c.ClientURL, "--listen-peer": c.PeerURL} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("embedded etcd: %s %q: expected a URL such as https://127.0.0.1:2379", name, u)
		}
		if c.TLS != nil && p.Scheme != "https" {
			return fmt.Errorf("embedded etcd: %s %q: the member serves TLS, so the URL is https://%s (or run with --insecure)", name, u, p.Host)
		}
		if c.TLS == nil && p.Scheme != "http" {
			return fmt.Errorf("embedded etcd: %s %q: https needs the member's TLS; drop --insecure or use http://%s", name, u, p.Host)
		}
	}
	if c.Solo && (c.InitialCluster != "" || c.ClusterState == "existing") {
		return errors.New("embedded etcd: a solo member has no cluster: drop --initial-cluster and --initial-cluster-state")
	}
	if err := c.validateCluster(); err != nil {
		return err
	}
	if c.QuotaBackend < 0 {
		return fmt.Errorf("embedded etcd: backend quota %d bytes: expected 0 (etcd's default) or more", c.QuotaBackend)
	}
	if c.MaxTxnOps < 128 {
		return fmt.Errorf("embedded etcd: max txn ops %d: expected at least 128", c.MaxTxnOps)
	}
	return nil
}

// validateCluster checks InitialCluster and ClusterState.
func (c Config) validateCluster() error {
	switch c.ClusterState {
	case "", "new", "existing":
	default:
		return fmt.Errorf("embedded etcd: --initial-cluster-state %q: expected new or existing", c.ClusterState)
	}
	if c.InitialCluster == "" {
		if c.ClusterState == "existing" {
			return errors.New("embedded etcd: --initial-cluster-state existing needs --initial-cluster: the members of the cluster joined, this one among them")
		}
		return nil
	}
	members, err := ParseInitialCluster(c.InitialCluster)
	if err != nil {
		return err
	}
	own, ok := members[c.Name]
	if !ok {
		return fmt.Errorf("embedded etcd: --initial-cluster %q has no member named %q (--name): expected %s=%s among them", c.InitialCluster, c.Name, c.Name, c.PeerURL)
	}
	if !slices.Contains(own, c.PeerURL) {
		return fmt.Errorf("embedded etcd: --initial-cluster gives member %q the peer URL %s, but --listen-peer is %s: expected them to be the same", c.Name, strings.Join(own, ","), c.PeerURL)
	}
	want := "http"
	if c.TLS != nil {
		want = "https"
	}
	for name, urls := range members {
		for _, u := range urls {
			if p, _ := url.Parse(u); p.Scheme != want {
				return fmt.Errorf("embedded etcd: --initial-cluster member %s=%s: the members serve %s, so the URL is %s://%s", name, u, want, want, p.Host)
			}
		}
	}
	return nil
}

// ParseInitialCluster reads etcd's --initial-cluster form,
// name=peerURL[,name=peerURL...] (a name may repeat for several URLs).
func ParseInitialCluster(s string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, u, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("embedded etcd: --initial-cluster entry %q: expected name=URL, such as s1=https://10.0.0.1:2380", part)
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("embedded etcd: --initial-cluster entry %q: expected name=URL, such as s1=https://10.0.0.1:2380", part)
		}
		out[name] = append(out[name], u)
	}
	return out, nil
}

// Etcd is a running in-process etcd member.
type Etcd struct {
	etcd      *embed.Etcd
	cfg       Config
	servers   *grpcServers
	closeOnce sync.Once
}

// StreamGrace is how long Close lets clients' calls finish before it cuts
// what is still open. etcd's own Close waits for every stream up to its
// request timeout (7s at the default election timeout), and a client's
// watch or lease keepalive never ends of itself: a server with agents
// connected took that long to stop, every time.
const StreamGrace = time.Second

// grpcServers are the member's gRPC servers, as etcd creates them (one
// per client listener, possibly after Start returns), for Close to cut.
type grpcServers struct {
	mu  sync.Mutex
	all []*grpc.Server
}

func (g *grpcServers) add(s *grpc.Server) {
	g.mu.Lock()
	g.all = append(g.all, s)
	g.mu.Unlock()
}

// stop cuts what is still open on the servers: their transports close,
// and calls, watches and keepalives with them.
func (g *grpcServers) stop() {
	g.mu.Lock()
	all := slices.Clone(g.all)
	g.mu.Unlock()
	for _, s := range all {
		s.Stop()
	}
}

// Start starts an etcd member and waits until it serves: for a
// member of several (InitialCluster), until a quorum of them has formed
// and this one has joined, so the servers of a new cluster are started
// together, each within StartWithin of the others.
func Start(cfg Config) (*Etcd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded etcd: data dir: %w", err)
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	cu, _ := url.Parse(cfg.ClientURL)
	pu, _ := url.Parse(cfg.PeerURL)
	ec.ListenClientUrls = []url.URL{*cu}
	ec.AdvertiseClientUrls = []url.URL{*cu}
	ec.ListenPeerUrls = []url.URL{*pu}
	ec.AdvertisePeerUrls = []url.URL{*pu}
	ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	if cfg.InitialCluster != "" {
		ec.InitialCluster = cfg.InitialCluster
	}
	if cfg.ClusterState == "existing" {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	if cfg.ClusterToken != "" {
		ec.InitialClusterToken = cfg.ClusterToken
	}
	ec.MaxTxnOps = cfg.MaxTxnOps
	if cfg.Solo {
		ec.TickMs, ec.ElectionMs = 20, 100
	}
	if t := cfg.TLS; t != nil {
		ec.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
		ec.PeerTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
		ec.ClientAutoTLS, ec.PeerAutoTLS = false, false
	}
	ec.MaxRequestBytes = cfg.MaxRequest
	ec.QuotaBackendBytes = cfg.QuotaBackend
	ec.SnapshotCount, ec.SnapshotCatchUpEntries = cfg.SnapshotCount, cfg.SnapshotCatchUpEntries // 0: etcd's defaults
	if cfg.InitialCluster == "" && cfg.ClusterState != "existing" && ec.SnapshotCatchUpEntries > soloCatchUpEntries {
		ec.SnapshotCatchUpEntries = soloCatchUpEntries // no follower to catch up
	}
	if cfg.AutoCompactionRetention != "" {
		ec.AutoCompactionMode = embed.CompactorModeRevision
		ec.AutoCompactionRetention = cfg.AutoCompactionRetention
	}
	if cfg.LogLevel == "" {
		ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		// etcd renders a slow request in full before it logs a warning
		// about it, logger or not: for the engine's large transactions
		// that costs more than applying them. Nobody reads a silent log.
		ec.WarningApplyDuration = time.Hour
		ec.WarningUnaryRequestDuration = time.Hour
	} else {
		ec.LogLevel = cfg.LogLevel
	}
	servers := &grpcServers{}
	ec.ServiceRegister = servers.add
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd (data %s, client %s, peer %s): %w", cfg.DataDir, cfg.ClientURL, cfg.PeerURL, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd: %w", err)
	case <-time.After(cfg.StartWithin):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd did not become ready within %s", cfg.StartWithin)
	}
	return &Etcd{etcd: e, cfg: cfg, servers: servers}, nil
}

// Endpoints are the client URLs to dial.
func (e *Etcd) Endpoints() []string { return []string{e.cfg.ClientURL} }

// Err reports a fatal error of the running member.
func (e *Etcd) Err() <-chan error { return e.etcd.Err() }

// Close stops the member; its data stays in DataDir. Clients' calls get
// StreamGrace to end; watches and keepalives still open then are cut, and
// their clients turn to another member or wait for this one's return. A
// second Close does nothing.
func (e *Etcd) Close() {
	e.closeOnce.Do(func() {
		done := make(chan struct{})
		go func() { defer close(done); e.etcd.Close() }() // graceful: waits for calls and streams
		select {
		case <-done:
		case <-time.After(StreamGrace):
			e.servers.stop() // etcd's Close goes on at once
			<-done
		}
	})
}
