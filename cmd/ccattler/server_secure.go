package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ccattler/ccattler/engine/reload"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/ccattler/ccattler/facts/pki"
	"github.com/ccattler/ccattler/rules"
	"github.com/hashicorp/hcl/v2"
)

// serverTLS is how a secure server reaches etcd: as root to manage users,
// roles and the built-in facts, and as the engine for everything the
// engine reads and writes. Nil fields: that identity is not available.
type serverTLS struct {
	root, engine *tls.Config
	caDir        string
}

// prepareEmbeddedTLS loads the server's CA (creating it on first start,
// like k3s) and issues what the embedded member and the server need: the
// member's serving certificate, root, engine, and user:admin for the
// operator's commands. It sets cfg.Embed.TLS.
func prepareEmbeddedTLS(cfg *serverConfig, log *slog.Logger) (*serverTLS, error) {
	dir := cfg.CADir
	if dir == "" {
		dir = filepath.Join(cfg.Embed.DataDir, "pki")
	}
	ca, created, err := pki.LoadOrInit(dir)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info("created the cluster's certificate authority", "dir", dir)
	}
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	for _, u := range []string{cfg.Embed.ClientURL, cfg.Embed.PeerURL} {
		if p, err := url.Parse(u); err == nil && p.Hostname() != "" {
			hosts = append(hosts, p.Hostname())
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	// One serving certificate per member: servers that share a CA
	// directory (--ca-dir) each keep their own.
	member, err := ca.Ensure("member-"+cfg.Embed.Name, pki.Server|pki.Client, dedupe(hosts)...)
	if err != nil {
		return nil, err
	}
	cfg.Embed.TLS = &embedded.TLS{CAFile: member.CA, CertFile: member.Cert, KeyFile: member.Key}
	st := &serverTLS{caDir: dir}
	for _, p := range []string{access.Root, access.KindEngine, access.Admin} {
		paths, err := ca.Ensure(p, pki.Client)
		if err != nil {
			return nil, err
		}
		c, err := pki.ClientTLS(paths.CA, paths.Cert, paths.Key)
		if err != nil {
			return nil, err
		}
		switch p {
		case access.Root:
			st.root = c
		case access.KindEngine:
			st.engine = c
		}
	}
	return st, nil
}

// engineWrites are the trees the engine's rule principals may write.
func engineWrites() []string {
	var out []string
	for p, trees := range rules.Principals {
		if p != "admin" {
			out = append(out, trees...)
		}
	}
	sort.Strings(out)
	return out
}

// builtinAccess are the built-in principals' rules under root.
func builtinAccess(root, leaderPrefix string) map[string]access.Rules {
	return access.Builtins(reload.CtlPrefix(root), leaderPrefix, engineWrites())
}

// secureBootstrap enables etcd auth, writes the built-in principals' rules
// where missing, and syncs etcd's users and roles once from what etcd
// holds, so the engine's identity works before the mirror exists.
func secureBootstrap(ctx context.Context, admin *facts.Store, leaderPrefix string, log *slog.Logger) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if enabled, err := access.Enable(cctx, admin); err != nil {
		return err
	} else if enabled {
		log.Info("etcd authentication enabled: clients are the Common Names of their certificates")
	}
	builtins := builtinAccess(admin.Root, leaderPrefix)
	wrote, err := access.Bootstrap(cctx, admin, builtins)
	if err != nil {
		return err
	}
	if len(wrote) > 0 {
		log.Info("built-in principals written", "principals", strings.Join(wrote, ","))
	}
	fs, _, err := admin.List(cctx, "auth/", 0)
	if err != nil {
		return err
	}
	ps := map[string]access.Rules{}
	for _, f := range fs {
		p, ok := access.PrincipalOf(f.Key)
		if r, err := access.Parse(p, f.Value); ok && err == nil {
			ps[p] = r
		}
	}
	// The engine's grants are kept as an admin left them; a newer version
	// whose rules write more says what is missing rather than widening them.
	if eng, ok := ps[access.KindEngine]; ok {
		var missing []string
		for _, w := range builtins[access.KindEngine].Writes() {
			if !eng.Covers(w) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			log.Warn("the engine's grants lack trees this version's rules write; rule sets writing there are rejected",
				"missing", strings.Join(missing, ","), "fix", "ccattler auth add engine --force")
		}
	}
	svcs, _, err := admin.List(cctx, "desired/service/", 0)
	if err != nil {
		return err
	}
	var names []string
	for _, f := range svcs {
		if n := strings.TrimPrefix(f.Key, "desired/service/"); !strings.Contains(n, "/") {
			names = append(names, n)
		}
	}
	if _, err := access.Sync(cctx, admin, access.Want(admin.Root, ps, names)); err != nil {
		return err
	}
	return nil
}

// enginePermit checks a rule set against the engine's own grants (the
// mirror's auth/engine/rules): every tree a rule's principal may write must
// be one etcd lets the engine write, or the set is rejected, since its
// commits would be refused one by one at run time.
func enginePermit(mirror *facts.Mirror) func(rs *rules.RuleSet) hcl.Diagnostics {
	return func(rs *rules.RuleSet) hcl.Diagnostics {
		var raw []byte
		mirror.View(func(r facts.Reader) {
			if f, ok := r.Get(facts.AuthRules(access.KindEngine)); ok {
				raw = f.Value
			}
		})
		granted, err := access.Parse(access.KindEngine, raw)
		if err != nil {
			return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "The engine's grants are unreadable",
				Detail: fmt.Sprintf("%v. An admin can restore them: ccattler auth add engine --force.", err)}}
		}
		var diags hcl.Diagnostics
		for _, r := range rs.Rules {
			for _, tree := range rules.Principals[r.Principal] {
				if granted.Covers(tree) {
					continue
				}
				rng := r.Range
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Principal beyond the engine's grants",
					Detail: fmt.Sprintf("Rule %q runs as principal %q, which writes %q; the engine's identity may not write there (auth/engine/rules). "+
						"Choose a principal inside the engine's grants, or have an admin extend auth/engine/rules.", r.Name, r.Principal, treeName(tree)),
					Subject: &rng})
			}
		}
		return diags
	}
}

func treeName(t string) string {
	if t == "" {
		return "everything"
	}
	return t
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
