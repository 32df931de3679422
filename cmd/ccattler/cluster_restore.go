package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/spf13/cobra"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// defaultRevisionBump is how far a restore moves the revision past the
// snapshot's, marking everything before compacted: a client that watched
// the cluster before (an agent's feed, a server's mirror) then gets
// ErrCompacted and lists again, instead of waiting for revisions it has
// already seen to come round a second time (etcd's advice for a restore).
const defaultRevisionBump = 1_000_000_000

func newSnapshotRestoreCmd() *cobra.Command {
	cfg := embedded.NewConfig()
	cfg.PeerURL = "https://127.0.0.1:2380" // the server's default, secure
	cfg.ClusterToken = "ccattler"
	cfg.DataDir = ""
	var bump uint64
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Restore a snapshot into a new data directory for a server to start on",
		Long: `Restore a snapshot written by ` + "`ccattler cluster snapshot save`" + ` into DIR,
which must not exist or be empty, as the etcd data of one member: the
member --name NAME at --listen-peer URL, of the cluster --initial-cluster
(default: that member alone) with --initial-cluster-token. Give the flags
the server will be started with. For a cluster of several servers, restore
the same snapshot once for each, with its own --name and --listen-peer and
the same --initial-cluster, then start them all.

The snapshot holds every fact, rule, user and role, not the CA: copy the
old data directory's pki/ into DIR (or start the server with --ca-dir) so
that the certificates issued before keep working. The revision is moved
--bump-revision past the snapshot's and what came before is marked
compacted, so agents and other clients that watched the old cluster list
it again. Nothing is contacted: the command works on files only.`,
		Example: `  ccattler cluster snapshot restore /backup/ccattler-2026-12-01.db --data-dir /var/lib/ccattler-restored
  cp -a /var/lib/ccattler/pki /var/lib/ccattler-restored/
  ccattler server --data-dir /var/lib/ccattler-restored`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.DataDir == "" {
				return usageError("snapshot restore: --data-dir is required: the new data directory to restore into")
			}
			if err := restoreSnapshot(args[0], cfg, bump); err != nil {
				return exitError{code: 1, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot %s restored into %s as member %s (%s)\nstart the server on it: ccattler server --data-dir %s --name %s --listen-peer %s\n",
				args[0], cfg.DataDir, cfg.Name, cfg.PeerURL, cfg.DataDir, cfg.Name, cfg.PeerURL)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", "", "the new data directory (must not exist, or be empty)")
	f.StringVar(&cfg.Name, "name", cfg.Name, "the member name the server will have (its --name)")
	f.StringVar(&cfg.PeerURL, "listen-peer", cfg.PeerURL, "the peer URL the server will have (its --listen-peer)")
	f.StringVar(&cfg.InitialCluster, "initial-cluster", "", "every member of the restored cluster, name=PEER-URL,... (default: this one alone)")
	f.StringVar(&cfg.ClusterToken, "initial-cluster-token", cfg.ClusterToken, "the restored cluster's token")
	f.Uint64Var(&bump, "bump-revision", defaultRevisionBump, "how far past the snapshot's revision the restored one starts (0: not moved; watchers of the old cluster may then miss changes)")
	return cmd
}

// restoreSnapshot checks what it can name first (the file, the directory,
// the cluster flags), then has etcd's own restore write the member's data.
func restoreSnapshot(file string, cfg embedded.Config, bump uint64) error {
	st, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("snapshot restore: %s is not a file", file)
	}
	if ents, err := os.ReadDir(cfg.DataDir); err == nil && len(ents) > 0 {
		return fmt.Errorf("snapshot restore: --data-dir %s is not empty: restore into a new directory, never over a member's data", cfg.DataDir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("snapshot restore: --data-dir: %w", err)
	}
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.Name + "=" + cfg.PeerURL
	}
	// The client URL is not part of a member's data: the server's
	// --listen-client may be anything. Validate checks both URLs' scheme.
	cfg.ClientURL = cfg.PeerURL
	if strings.HasPrefix(cfg.PeerURL, "https://") {
		cfg.TLS = &embedded.TLS{}
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	rc := snapshot.RestoreConfig{
		SnapshotPath:        file,
		Name:                cfg.Name,
		OutputDataDir:       cfg.DataDir,
		PeerURLs:            []string{cfg.PeerURL},
		InitialCluster:      cfg.InitialCluster,
		InitialClusterToken: cfg.ClusterToken,
		RevisionBump:        bump,
		MarkCompacted:       bump > 0,
	}
	if err := snapshot.NewV3(zap.NewNop()).Restore(rc); err != nil {
		// A half-written directory would be taken for a member's data by
		// the next try, or by a server started on it.
		_ = os.RemoveAll(filepath.Join(cfg.DataDir, "member"))
		return fmt.Errorf("snapshot restore of %s into %s: %w", file, cfg.DataDir, err)
	}
	return nil
}
