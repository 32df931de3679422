package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/embedded"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newClusterCmd) }

// The membership of the servers' etcd cluster is etcd's own (root may
// change it, under etcd auth), so these commands reach etcd as root unless
// --identity or --cert says otherwise.
func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "The servers' etcd cluster: its members, adding and removing one, a snapshot",
		Long: `Operate the etcd cluster that servers started with --initial-cluster form
(docs/operations.md). The commands connect as root: give --tls-dir of a
server's CA directory (it holds root's certificate) or --cert/--key.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newClusterMembersCmd(), newClusterMemberCmd(), newClusterSnapshotCmd())
	return cmd
}

func newClusterMembersCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the cluster's members and which one leads",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.dialAs(cmd.Context(), access.Root)
			if err != nil {
				return err
			}
			defer s.Close()
			ms, err := s.Members(cmd.Context())
			if err != nil {
				return exitError{code: 1, err: fmt.Errorf("list the members: %w", err)}
			}
			return printMembers(cmd.OutOrStdout(), ms, s.RaftLeader(cmd.Context(), ms))
		},
	}
}

type memberJSON struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Peers   []string `json:"peer_urls"`
	Clients []string `json:"client_urls"`
	Leader  bool     `json:"leader"`
	Learner bool     `json:"learner,omitempty"`
	Started bool     `json:"started"`
}

func printMembers(w io.Writer, ms []facts.Member, leader uint64) error {
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	var rows []memberJSON
	for _, m := range ms {
		rows = append(rows, memberJSON{ID: fmt.Sprintf("%x", m.ID), Name: m.Name, Peers: m.PeerURLs, Clients: m.ClientURLs,
			Leader: m.ID == leader, Learner: m.Learner, Started: m.Name != ""})
	}
	if g.output == "json" {
		return printJSON(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tPEER\tCLIENT\tLEADER")
	for _, r := range rows {
		name := r.Name
		if !r.Started {
			name = "(not started)"
		}
		lead := ""
		if r.Leader {
			lead = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, r.ID, strings.Join(r.Peers, ","), strings.Join(r.Clients, ","), lead)
	}
	return tw.Flush()
}

func newClusterMemberCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "member",
		Short: "Add a member to the cluster, or remove one",
		Args:  cobra.NoArgs,
	}
	var peer string
	add := &cobra.Command{
		Use:   "add NAME --peer URL",
		Short: "Add a member, then print the flags its server starts with",
		Long: `Add a member to the etcd cluster before its server starts: etcd then
expects it, and the new server joins with --initial-cluster-state existing
and the --initial-cluster this prints. Add one member at a time and start
its server before adding the next: an added member that is not running
counts against the quorum.

etcd takes a new member only once a quorum of the members have been
connected for 5 seconds: in a cluster's first seconds, or just after a
member was removed, the command says so and asks again until --timeout.`,
		Example: `  ccattler --tls-dir /etc/ccattler/pki cluster member add s4 --peer https://10.0.0.4:2380`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if peer == "" {
				return usageError("cluster member add %s: --peer URL is required (the new server's --listen-peer)", name)
			}
			if _, err := embedded.ParseInitialCluster(name + "=" + peer); err != nil {
				return usageError("%v", err)
			}
			s, err := g.dialAs(cmd.Context(), access.Root)
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.Members(cmd.Context())
			if err != nil {
				return exitError{code: 1, err: fmt.Errorf("list the members: %w", err)}
			}
			for _, m := range list {
				if m.Name == name {
					return exitError{code: 1, err: fmt.Errorf("the cluster has a member named %s already (id %x): remove it first, or choose another name", name, m.ID)}
				}
			}
			added, all, err := s.AddMember(cmd.Context(), peer, func(error) {
				until := "interrupted"
				if g.timeout > 0 {
					until = "--timeout " + g.timeout.String()
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "waiting: etcd adds a member once a quorum of the members have been connected for 5s (a cluster just formed, or a member just removed or down); asking again until %s\n", until)
			})
			if errors.Is(err, facts.ErrUnhealthyCluster) {
				return exitError{code: 1, err: fmt.Errorf("add member %s at %s: %w: etcd takes a new member only once a quorum of the members have been connected for 5s; start the members that are down (ccattler cluster members), then try again", name, peer, err)}
			}
			if err != nil {
				return exitError{code: 1, err: fmt.Errorf("add member %s at %s: %w", name, peer, err)}
			}
			var ic []string
			for _, m := range all {
				n := m.Name
				if m.ID == added.ID {
					n = name
				}
				for _, u := range m.PeerURLs {
					ic = append(ic, n+"="+u)
				}
			}
			sort.Strings(ic)
			out := cmd.OutOrStdout()
			if g.output == "json" {
				return printJSON(out, map[string]string{"id": fmt.Sprintf("%x", added.ID), "name": name,
					"initial_cluster": strings.Join(ic, ","), "initial_cluster_state": "existing"})
			}
			fmt.Fprintf(out, "member %s added (id %x); start its server with:\n  --name %s --listen-peer %s --initial-cluster %s --initial-cluster-state existing\n",
				name, added.ID, name, peer, strings.Join(ic, ","))
			return nil
		},
	}
	add.Flags().StringVar(&peer, "peer", "", "the new member's peer URL (its server's --listen-peer)")
	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a member (stop its server first, or it stops itself)",
		Long: `Remove a member from the etcd cluster. Its server's etcd then stops: stop
the server and delete its data directory before it may join again (as a
new member, after cluster member add).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.dialAs(cmd.Context(), access.Root)
			if err != nil {
				return err
			}
			defer s.Close()
			list, err := s.Members(cmd.Context())
			if err != nil {
				return exitError{code: 1, err: fmt.Errorf("list the members: %w", err)}
			}
			var names []string
			for _, m := range list {
				if m.Name == args[0] || fmt.Sprintf("%x", m.ID) == args[0] {
					if err := s.RemoveMember(cmd.Context(), m.ID); err != nil {
						return exitError{code: 1, err: fmt.Errorf("remove member %s (id %x): %w", args[0], m.ID, err)}
					}
					fmt.Fprintf(cmd.OutOrStdout(), "member %s removed (id %x)\n", args[0], m.ID)
					return nil
				}
				names = append(names, m.Name)
			}
			return exitError{code: 1, err: fmt.Errorf("no member named %s: the members are %s", args[0], strings.Join(names, ", "))}
		},
	}
	cmd.AddCommand(add, remove)
	return cmd
}

func newClusterSnapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up the cluster: an etcd snapshot of every fact",
		Args:  cobra.NoArgs,
	}
	save := &cobra.Command{
		Use:     "save FILE",
		Short:   "Write an etcd snapshot of the cluster to FILE",
		Long:    "Write a consistent etcd snapshot (the whole keyspace: facts, rules, users and roles) to FILE, through a temporary file renamed once complete. Restore it with `ccattler cluster snapshot restore` (docs/operations.md).",
		Example: "  ccattler --tls-dir /etc/ccattler/pki cluster snapshot save /backup/ccattler-$(date +%F).db",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.dialAs(cmd.Context(), access.Root)
			if err != nil {
				return err
			}
			defer s.Close()
			rc, err := s.Snapshot(cmd.Context())
			if err != nil {
				return exitError{code: 1, err: fmt.Errorf("snapshot: %w", err)}
			}
			defer rc.Close()
			tmp, err := os.CreateTemp(filepath.Dir(args[0]), ".snapshot-*")
			if err != nil {
				return exitError{code: 1, err: err}
			}
			defer os.Remove(tmp.Name())
			n, err := io.Copy(tmp, rc)
			if err == nil {
				err = tmp.Sync()
			}
			if cerr := tmp.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return exitError{code: 1, err: fmt.Errorf("snapshot to %s: %w", args[0], err)}
			}
			if err := os.Rename(tmp.Name(), args[0]); err != nil {
				return exitError{code: 1, err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "snapshot of %d bytes written to %s\n", n, args[0])
			return nil
		},
	}
	cmd.AddCommand(save, newSnapshotRestoreCmd())
	return cmd
}
