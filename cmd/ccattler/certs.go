package main

import (
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/facts/access"
	"github.com/ccattler/ccattler/facts/pki"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newCertsCmd) }

func newCertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make the certificates principals authenticate with (a CA, and one certificate per principal)",
		Long: `Make the cluster's certificates without a PKI team.

A principal is the Common Name of its certificate: etcd takes it as the
user, and auth/{principal}/rules says what it may read and write
(docs/security.md). ccattler server creates its CA in DATA-DIR/pki on first
start; certs init makes one elsewhere (give it to the server with --ca-dir),
certs issue makes a principal's certificate with it. Nothing here talks to
etcd: a new principal also needs its rules (ccattler auth add).`,
		Args: cobra.NoArgs,
	}
	var dir string
	initCmd := &cobra.Command{
		Use:     "init --dir DIR",
		Short:   "Create a CA: DIR/ca.crt and DIR/ca.key (0600)",
		Example: "  ccattler certs init --dir /etc/ccattler/pki",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return usageError("certs init: --dir is required")
			}
			ca, err := pki.Init(dir)
			if err != nil {
				return exitError{code: 1, err: err}
			}
			out := cmd.OutOrStdout()
			if g.output == "json" {
				return printJSON(out, map[string]string{"ca_cert": ca.Dir + "/" + pki.CACertFile, "ca_key": ca.Dir + "/" + pki.CAKeyFile})
			}
			fmt.Fprintf(out, "%s/%s\n%s/%s\n", ca.Dir, pki.CACertFile, ca.Dir, pki.CAKeyFile)
			return nil
		},
	}
	initCmd.Flags().StringVar(&dir, "dir", "", "directory of the CA (created 0700)")

	var name string
	var hosts []string
	var server bool
	issueCmd := &cobra.Command{
		Use:   "issue --dir DIR --name PRINCIPAL",
		Short: "Issue PRINCIPAL's certificate: DIR/PRINCIPAL.crt and DIR/PRINCIPAL.key (0600)",
		Long: `Issue a client certificate whose Common Name is PRINCIPAL, signed by the CA
in DIR, and print the paths of the certificate and its key. An earlier
certificate of the same name is replaced. Principals: user:{name},
node:{id}, node:{prefix}* (a fleet of simulated nodes), engine, auditor.`,
		Example: `  ccattler certs issue --dir ccattler-data/pki --name node:node-2
  ccattler certs issue --dir ccattler-data/pki --name user:alice
  ccattler --tls-dir ccattler-data/pki auth add node:node-2   # then let it in`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" || name == "" {
				return usageError("certs issue: --dir and --name are required")
			}
			if name != access.Root {
				if _, _, err := access.Kind(name); err != nil {
					return usageError("--name %q: %v", name, strings.TrimPrefix(err.Error(), "access: "))
				}
			}
			ca, err := pki.Load(dir)
			if err != nil {
				return exitError{code: 1, err: err}
			}
			usage := pki.Client
			if server {
				usage |= pki.Server
			}
			p, err := ca.Issue(name, usage, hosts...)
			if err != nil {
				return exitError{code: 1, err: err}
			}
			out := cmd.OutOrStdout()
			if g.output == "json" {
				return printJSON(out, map[string]string{"name": name, "cert": p.Cert, "key": p.Key, "ca_cert": p.CA})
			}
			fmt.Fprintf(out, "%s\n%s\n", p.Cert, p.Key)
			return nil
		},
	}
	issueCmd.Flags().StringVar(&dir, "dir", "", "directory of the CA")
	issueCmd.Flags().StringVar(&name, "name", "", "the principal: the certificate's Common Name")
	issueCmd.Flags().BoolVar(&server, "server", false, "also a serving certificate (for --host names)")
	issueCmd.Flags().StringSliceVar(&hosts, "host", nil, "with --server: DNS names and IP addresses it serves")
	cmd.AddCommand(initCmd, issueCmd)
	return cmd
}
