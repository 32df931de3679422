package main

import (
	"fmt"
	"strings"

	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newValidateCmd) }

func newValidateCmd() *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR [-f ...]",
		Short: "Check service and volume files as apply would, offline: no etcd needed",
		Long: `Check the files with every check apply makes before it reads the store:
syntax, known blocks and attributes, value types and limits, names,
duplicates. Every problem is printed as file:line:col with the source line,
and the exit status is 1; valid files print what they declare and exit 0.

It reads no etcd, so it cannot check what only the store knows: a volume a
service names must be declared in the files or in the store. validate names
such volumes; apply refuses the files if the store lacks them.`,
		Example: `  ccattler validate -f web.hcl
  ccattler validate -f services/ -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(files) == 0 {
				return usageError("validate: no files: give -f FILE or -f DIR (see ccattler validate --help)")
			}
			doc, err := readDoc(cmd, files)
			if err != nil {
				return err
			}
			var services, volumes []string
			declared := map[string]bool{}
			for _, o := range doc.Objects {
				if o.Kind == spec.KindVolume {
					volumes = append(volumes, o.Name)
					declared[o.Name] = true
				} else {
					services = append(services, o.Name)
				}
			}
			var external []string // volumes the store must declare
			for _, f := range doc.Facts() {
				name, ok := strings.CutPrefix(f.Key, "desired/service/")
				if !ok || !strings.HasSuffix(name, "/volume") {
					continue
				}
				if v, ok := facts.StringValue(f.Value); ok && !declared[v] {
					external = append(external, fmt.Sprintf("%s (service %s)", v, strings.TrimSuffix(name, "/volume")))
				}
			}
			if g.output == "json" {
				return printJSON(cmd.OutOrStdout(), map[string]any{"files": files, "valid": true,
					"services": nonNil(services), "volumes": nonNil(volumes), "volumes_from_store": nonNil(external)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: valid: %d %s%s, %d %s%s\n", strings.Join(files, ", "),
				len(services), plural(len(services), "service", "services"), listed(services),
				len(volumes), plural(len(volumes), "volume", "volumes"), listed(volumes))
			for _, e := range external {
				fmt.Fprintf(cmd.OutOrStdout(), "note: volume %s is not declared in these files: apply needs it declared in the store\n", e)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a file, or a directory of *.hcl files (repeatable)")
	return cmd
}

func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
