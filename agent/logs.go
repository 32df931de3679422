package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/pki"
)

// Logged is implemented by runtimes that keep their containers' output
// (stdout and stderr, interleaved): containerd in <state-dir>/logs/<id>.log,
// sim as a synthetic line per start.
type Logged interface {
	// OpenLog opens the output of instance id from its start. An instance
	// the runtime has no output of is an error wrapping os.ErrNotExist.
	OpenLog(id string) (io.ReadCloser, error)
}

// LogServer serves the output of the containers of its nodes over HTTP:
//
//	GET /v1/logs/{node-id}/{instance-id}[?follow=true]
//
// It listens on Addr, which each node reports as observed/node/{id}/logs so
// that `ccattler logs` finds it. With follow, the response streams what the
// container writes until it is gone (stopped and removed) or the client
// leaves.
//
// With TLS (the agent's own identity, pki.ServeMutual) it serves HTTPS
// only and requires a client certificate of the cluster's CA; the
// certificate's Common Name is who asks, and only users (user:admin among
// them) and auditors may read container output: a node, the engine or
// anyone else is refused with 403, so one compromised node cannot read
// another's containers. Without TLS (an insecure cluster, `--insecure`) it
// speaks plain HTTP, meant for loopback.
type LogServer struct {
	Addr  string
	Nodes []NodeConfig
	// TLS is the server's configuration (pki.ServeMutual of the agent's
	// certificate); nil serves plain HTTP.
	TLS *tls.Config
	Log *slog.Logger
	// Poll is how often a followed log is checked for more output; default 200ms.
	Poll time.Duration
}

// Serve listens on Addr and serves until ctx is done. The error is the
// listener's (e.g. the address is in use).
func (s *LogServer) Serve(ctx context.Context) error {
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("--logs-address %s: %w", s.Addr, err)
	}
	if s.TLS != nil {
		if s.TLS.ClientAuth != tls.RequireAndVerifyClientCert || s.TLS.ClientCAs == nil {
			l.Close()
			return fmt.Errorf("--logs-address %s: the TLS configuration must require client certificates of the CA (pki.ServeMutual)", s.Addr)
		}
		l = tls.NewListener(l, s.TLS)
	}
	return s.serve(ctx, l)
}

func (s *LogServer) serve(ctx context.Context, l net.Listener) error {
	if s.Poll <= 0 {
		s.Poll = 200 * time.Millisecond
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	rts := map[string]Runtime{}
	for _, n := range s.Nodes {
		rts[n.ID] = n.Runtime
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/logs/{node}/{instance}", func(w http.ResponseWriter, r *http.Request) {
		if s.TLS != nil {
			if who := pki.PeerName(r.TLS); !MayReadLogs(who) {
				s.Log.Warn("container output refused", "principal", who, "remote", r.RemoteAddr, "path", r.URL.Path)
				http.Error(w, fmt.Sprintf("%s may not read container output: users and auditors may", who), http.StatusForbidden)
				return
			}
		}
		s.handle(w, r, rts)
	})
	// A TLS handshake failure (no certificate, another CA, plain HTTP
	// on the TLS port) is the client's problem: logged by net/http at
	// its own level, it never reaches a handler.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug)}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s *LogServer) handle(w http.ResponseWriter, r *http.Request, rts map[string]Runtime) {
	node, id := r.PathValue("node"), r.PathValue("instance")
	if facts.CheckSegment("instance-id", id) != nil {
		http.Error(w, fmt.Sprintf("%q is not an instance id (5-16 lowercase hex characters)", id), http.StatusBadRequest)
		return
	}
	rt, ok := rts[node]
	if !ok {
		http.Error(w, fmt.Sprintf("node %q is not served here", node), http.StatusNotFound)
		return
	}
	lg, ok := rt.(Logged)
	if !ok {
		http.Error(w, fmt.Sprintf("the runtime of node %s keeps no container output", node), http.StatusNotImplemented)
		return
	}
	f, err := lg.OpenLog(id)
	if errors.Is(err, os.ErrNotExist) {
		http.Error(w, fmt.Sprintf("no output of instance %s on node %s (never started here, or collected)", id, node), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	follow := r.URL.Query().Get("follow") == "true"
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the client left
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			s.Log.Warn("read container log", "instance", id, "err", err)
			return
		}
		if !follow {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		// At the end of what was written: wait for more while the
		// container exists, and for a moment after, for its last words.
		if !s.exists(r.Context(), rt, id) {
			if n, _ := f.Read(buf); n > 0 {
				_, _ = w.Write(buf[:n])
				continue
			}
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(s.Poll):
		}
	}
}

// exists reports whether the runtime still has a running container for id.
func (s *LogServer) exists(ctx context.Context, rt Runtime, id string) bool {
	list, err := rt.List(ctx)
	if err != nil {
		return true // cannot tell: keep following
	}
	for _, st := range list {
		if st.Spec.ID == id {
			return st.Running
		}
	}
	return false
}

// MayReadLogs reports whether principal (a client certificate's Common
// Name) may read container output: users, user:admin among them, and
// auditors. Nodes may not: a node's certificate is on a machine that runs
// other people's containers.
func MayReadLogs(principal string) bool {
	kind, _, err := access.Kind(principal)
	return err == nil && (kind == access.KindUser || kind == access.KindAuditor)
}

// LogURL is where a LogServer at addr serves the output of instance id of
// node: https when it serves TLS (secure), http otherwise.
func LogURL(addr, node, id string, follow, secure bool) string {
	scheme := "http://"
	if secure {
		scheme = "https://"
	}
	u := scheme + addr + "/v1/logs/" + node + "/" + id
	if follow {
		u += "?follow=true"
	}
	return u
}
