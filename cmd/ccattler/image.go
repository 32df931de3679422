package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ccattler/ccattler/agent/containerd"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newImageCmd) }

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image pack|import",
		Short: "Make and load container images without a registry",
		Long: `Make and load container images on machines without a registry.

  pack    writes an OCI image archive of static binaries and files
  import  loads an archive into a node's containerd, as --image-dir does at
          the agent's start

See docs/nodes.md for the whole path from a Debian machine to a running
container.`,
	}
	cmd.AddCommand(newImagePackCmd(), newImageImportCmd())
	return cmd
}

func newImagePackCmd() *cobra.Command {
	var name, out string
	var files, links, entrypoint, cmdArgs, env []string
	cmd := &cobra.Command{
		Use:   "pack --name IMAGE --file SRC[:DEST] ... -o ARCHIVE",
		Short: "Write an OCI image archive of static binaries and files",
		Long: `Write an OCI image archive (one layer) holding the given files, named IMAGE
as a service's image names it. A file is SRC (copied to the same path) or
SRC:DEST; --link DEST=TARGET adds a symbolic link. The archive is the same
for the same input, so packing twice gives the same image.`,
		Example: `  # busybox from Debian's busybox-static, with /bin/sh
  ccattler image pack --name busybox:1 --file /bin/busybox --link /bin/sh=/bin/busybox \
      --env PATH=/bin --entrypoint /bin/sh -o busybox.tar`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" || out == "" || len(files) == 0 {
				return usageError("image pack: --name, --file and -o are required")
			}
			spec := containerd.PackSpec{Ref: name, Entrypoint: entrypoint, Cmd: cmdArgs, Env: env}
			for _, f := range files {
				src, dest, ok := strings.Cut(f, ":")
				if !ok {
					dest = src
				}
				abs, err := filepath.Abs(src)
				if err != nil {
					return usageError("--file %s: %v", f, err)
				}
				st, err := os.Stat(abs)
				if err != nil || !st.Mode().IsRegular() {
					return usageError("--file %s: expected a regular file (%v)", src, err)
				}
				b, err := os.ReadFile(abs)
				if err != nil {
					return usageError("--file %s: %v", src, err)
				}
				if !ok {
					dest = abs
				}
				spec.Files = append(spec.Files, containerd.PackFile{Path: dest, Mode: int64(st.Mode().Perm()), Data: b})
			}
			for _, l := range links {
				dest, target, ok := strings.Cut(l, "=")
				if !ok || dest == "" || target == "" {
					return usageError("--link %q: expected DEST=TARGET such as /bin/sh=/bin/busybox", l)
				}
				spec.Files = append(spec.Files, containerd.PackFile{Path: dest, Link: target})
			}
			var buf bytes.Buffer
			if err := containerd.Pack(&buf, spec); err != nil {
				return usageError("%v", err)
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: image %s, %d files, %d bytes\n", out, name, len(spec.Files), buf.Len())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "the image's name, as a service's image says it, e.g. busybox:1")
	fl.StringVarP(&out, "output", "o", "", "the archive to write (.tar)")
	fl.StringArrayVar(&files, "file", nil, "a file to add, SRC or SRC:DEST (repeatable)")
	fl.StringArrayVar(&links, "link", nil, "a symbolic link to add, DEST=TARGET (repeatable)")
	fl.StringArrayVar(&entrypoint, "entrypoint", nil, "the program and its first arguments (repeatable, in order); a service's command replaces it")
	fl.StringArrayVar(&cmdArgs, "cmd", nil, "default arguments (repeatable); a service's args replace them")
	fl.StringArrayVar(&env, "env", nil, "NAME=VALUE in the image's environment (repeatable)")
	return cmd
}

func newImageImportCmd() *cobra.Command {
	var address, namespace, snapshotter string
	cmd := &cobra.Command{
		Use:   "import ARCHIVE...",
		Short: "Load image archives into this node's containerd, for its agent",
		Long: `Load OCI or docker image archives (.tar, .tar.gz) into the containerd of this
machine, in the namespace the agent uses, and unpack them: instances of a
service naming the image then start without a pull. Run it on the node
(as root, like the agent), with the agent's --containerd-address and
--namespace if they are not the defaults.`,
		Example: `  ccattler image import busybox.tar`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rc := containerd.NewConfig()
			rc.Address, rc.Namespace, rc.Snapshotter, rc.Address4 = address, namespace, snapshotter, "127.0.0.1"
			rt, err := containerd.New(cmd.Context(), rc)
			if err != nil {
				return usageError("%v", err)
			}
			defer rt.Close()
			for _, a := range args {
				names, err := rt.Import(cmd.Context(), a)
				if err != nil {
					return exitError{code: 1, err: err}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "imported %s: %s\n", a, strings.Join(names, ", "))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&address, "containerd-address", "/run/containerd/containerd.sock", "containerd's socket")
	fl.StringVar(&namespace, "namespace", "ccattler", "containerd namespace of ccattler's containers")
	fl.StringVar(&snapshotter, "snapshotter", "overlayfs", "containerd snapshotter (native where overlayfs is unavailable)")
	return cmd
}
