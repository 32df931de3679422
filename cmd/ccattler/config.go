package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newConfigCmd) }

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show and change the client configuration: named contexts of endpoints and certificates",
		Long: `The client configuration holds named contexts, each the etcd endpoints and the
certificates of one cluster, and the current one. Every client command takes
what a flag or an environment variable does not give from the context named
by --context, else $CCATTLER_CONTEXT, else the file's current_context:

  flags > environment (CCATTLER_ETCD, CCATTLER_TLS_DIR, ...) > context > defaults

The file is $CCATTLER_CONFIG, else $XDG_CONFIG_HOME/ccattler/config.hcl, else
~/.config/ccattler/config.hcl. It is HCL:

  current_context = "prod"

  context "prod" {
    etcd     = ["https://10.0.0.1:2379", "https://10.0.0.2:2379"]
    tls_dir  = "/etc/ccattler/pki"   # or cacert, cert and key
    identity = "user:alice"          # the certificate in tls_dir to use
  }

Relative paths are relative to the file's directory. ccattler dev adds a
context for itself while it runs.`,
		Example: `  ccattler config set-context prod --etcd https://10.0.0.1:2379 --tls-dir /etc/ccattler/pki
  ccattler config use-context prod
  ccattler config get-contexts
  CCATTLER_CONTEXT=dev ccattler get instances`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageError("config: expected a subcommand: current-context, get-contexts, use-context, set-context, delete-context")
		},
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:   "current-context",
			Short: "Print the name of the context commands use ($CCATTLER_CONTEXT, else the file's current_context)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, path, err := readClientConfig()
				if err != nil {
					return err
				}
				name := currentContext(cfg)
				if name == "" {
					return exitError{code: 1, err: fmt.Errorf("no current context in %s; set one with ccattler config use-context NAME", path)}
				}
				fmt.Fprintln(cmd.OutOrStdout(), name)
				return nil
			},
		},
		&cobra.Command{
			Use:   "get-contexts",
			Short: "List the contexts, the current one marked with *",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				cfg, path, err := readClientConfig()
				if err != nil {
					return err
				}
				cur := currentContext(cfg)
				if g.output == "json" {
					type row struct {
						Name    string   `json:"name"`
						Current bool     `json:"current"`
						Etcd    []string `json:"etcd"`
						TLSDir  string   `json:"tls_dir,omitempty"`
						CACert  string   `json:"cacert,omitempty"`
						Cert    string   `json:"cert,omitempty"`
					}
					rows := []row{}
					for _, c := range cfg.Contexts {
						rows = append(rows, row{c.Name, c.Name == cur, c.Etcd, c.TLSDir, c.CACert, c.Cert})
					}
					return printJSON(cmd.OutOrStdout(), map[string]any{"file": path, "current": cur, "contexts": rows})
				}
				if len(cfg.Contexts) == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "no contexts in %s\n", path)
					return nil
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CURRENT\tNAME\tETCD\tCERTIFICATES")
				for _, c := range cfg.Contexts {
					mark := ""
					if c.Name == cur {
						mark = "*"
					}
					certs := c.TLSDir
					if certs == "" {
						certs = c.Cert
					}
					if certs == "" {
						certs = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, c.Name, strings.Join(c.Etcd, ","), certs)
				}
				return tw.Flush()
			},
		},
		&cobra.Command{
			Use:   "use-context NAME",
			Short: "Make NAME the current context",
			Args:  exactArgs(1, "use-context NAME"),
			RunE: func(cmd *cobra.Command, args []string) error {
				path, err := configPath()
				if err != nil {
					return err
				}
				err = editClientConfig(path, func(cfg *clientConfig, body *hclwrite.Body) error {
					if cfg.find(args[0]) == nil {
						return usageError("use-context %q: no such context in %s (known: %s)", args[0], path, strings.Join(cfg.names(), ", "))
					}
					setCurrentContext(body, args[0])
					return nil
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "current context: %s\n", args[0])
				return nil
			},
		},
		&cobra.Command{
			Use:   "set-context NAME [--etcd URL,...] [--tls-dir DIR | --cacert F --cert F --key F] [--identity P]",
			Short: "Add or replace the context NAME with the endpoint and certificate flags given",
			Args:  exactArgs(1, "set-context NAME"),
			RunE: func(cmd *cobra.Command, args []string) error {
				c := clientContext{Name: args[0], Identity: g.tls.identity}
				if err := checkContextName(c.Name); err != nil {
					return err
				}
				if cmd.Flags().Changed("etcd") || g.etcdGiven {
					c.Etcd = g.endpoints()
				}
				if cmd.Flags().Changed("root") {
					c.Root = g.root
				}
				for _, p := range []struct {
					dst *string
					v   string
				}{{&c.CACert, g.tls.cacert}, {&c.Cert, g.tls.cert}, {&c.Key, g.tls.key}, {&c.TLSDir, g.tls.dir}} {
					if p.v == "" {
						continue
					}
					abs, err := filepath.Abs(p.v)
					if err != nil {
						return err
					}
					*p.dst = abs
				}
				if len(c.Etcd) == 0 {
					return usageError("set-context %s: give the endpoints with --etcd URL[,URL...]", c.Name)
				}
				path, err := configPath()
				if err != nil {
					return err
				}
				if err := editClientConfig(path, func(_ *clientConfig, body *hclwrite.Body) error {
					setContextBlock(body, c)
					return nil
				}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "context %s written to %s\n", c.Name, path)
				return nil
			},
		},
		&cobra.Command{
			Use:   "delete-context NAME",
			Short: "Remove the context NAME (and current_context if it names it)",
			Args:  exactArgs(1, "delete-context NAME"),
			RunE: func(cmd *cobra.Command, args []string) error {
				path, err := configPath()
				if err != nil {
					return err
				}
				return editClientConfig(path, func(cfg *clientConfig, body *hclwrite.Body) error {
					if !removeContextBlock(body, args[0]) {
						return usageError("delete-context %q: no such context in %s", args[0], path)
					}
					if cfg.CurrentContext == args[0] {
						setCurrentContext(body, "")
					}
					return nil
				})
			},
		},
	)
	return cmd
}

// readClientConfig loads the file commands read.
func readClientConfig() (*clientConfig, string, error) {
	path, err := configPath()
	if err != nil {
		return nil, "", err
	}
	cfg, err := loadClientConfig(path)
	return cfg, path, err
}

// currentContext is the context commands use without --context.
func currentContext(cfg *clientConfig) string {
	if g.context != "" {
		return g.context
	}
	if e := envContext(); e != "" {
		return e
	}
	return cfg.CurrentContext
}

// checkContextName refuses a name that would not survive being a label.
func checkContextName(name string) error {
	if name == "" || strings.ContainsAny(name, "\"\\\n\r\t ${}") {
		return usageError("context name %q: expected letters, digits, '-', '_', '.' or ':'", name)
	}
	return nil
}

// exactArgs is cobra.ExactArgs with a usage error (exit 2) naming the form.
func exactArgs(n int, form string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("%s: expected %s", cmd.Name(), form)
		}
		return nil
	}
}
