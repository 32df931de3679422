package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newVersionCmd) }

// versionInfo is what `ccattler version -o json` prints. Its fields come
// from the build information the Go toolchain embeds in the binary: the
// module version ("(devel)" for a build from a checkout), the VCS commit
// and whether the tree had uncommitted changes, and the versions of the
// etcd and containerd client modules it was built with.
type versionInfo struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	CommitTime string `json:"commit_time"`
	Modified   bool   `json:"modified"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
	Etcd       string `json:"etcd_client"`
	Containerd string `json:"containerd_client"`
}

// Modules whose versions `ccattler version` reports.
const (
	etcdClientModule       = "go.etcd.io/etcd/client/v3"
	containerdClientModule = "github.com/containerd/containerd/v2"
)

func buildVersion() versionInfo {
	v := versionInfo{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v // a binary built without module support
	}
	v.Version = bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		switch d.Path {
		case etcdClientModule:
			v.Etcd = d.Version
		case containerdClientModule:
			v.Containerd = d.Version
		}
	}
	return v
}

// short is the one line --version prints.
func (v versionInfo) short() string {
	commit := v.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown commit"
	}
	if v.Modified {
		commit += "+modified"
	}
	return fmt.Sprintf("%s (%s, %s)", v.Version, commit, v.Go)
}

func setVersion(root *cobra.Command) {
	root.Version = buildVersion().short()
	root.SetVersionTemplate("ccattler {{.Version}}\n")
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go version and client library versions",
		Long: `Print what this binary was built from: the module version, the VCS commit
(marked +modified when the tree had uncommitted changes), the Go version and
platform, and the versions of the etcd and containerd client libraries.
--version prints the first line alone. Nothing is asked of the cluster.`,
		Example: `  ccattler version
  ccattler version -o json | jq -r .commit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := buildVersion()
			if g.output == "json" {
				return printJSON(cmd.OutOrStdout(), v)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "ccattler %s\n", v.short())
			fmt.Fprintf(&b, "  commit:            %s\n", orUnknown(v.Commit))
			fmt.Fprintf(&b, "  commit time:       %s\n", orUnknown(v.CommitTime))
			fmt.Fprintf(&b, "  go:                %s %s\n", v.Go, v.Platform)
			fmt.Fprintf(&b, "  etcd client:       %s\n", orUnknown(v.Etcd))
			fmt.Fprintf(&b, "  containerd client: %s\n", orUnknown(v.Containerd))
			_, err := fmt.Fprint(cmd.OutOrStdout(), b.String())
			return err
		},
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
