package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

//go:generate go run . gen-man ../../docs/man

func init() { subcommands = append(subcommands, newGenManCmd) }

// newGenManCmd writes the man pages (section 1, one per command) that
// docs/man holds; TestManPagesUpToDate fails when they are stale.
func newGenManCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man DIR",
		Short:  "Write a man page for every command into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			if err := genMan(cmd.Root(), args[0], time.Now()); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "man pages written to %s\n", args[0])
			return nil
		},
	}
}

// machineDefaults are the flags whose defaults depend on the machine.
var machineDefaults = map[string]string{"engine-id": "HOSTNAME-PID"}

// genMan writes the pages of root's tree; date is the only thing in them
// that is not from the commands themselves.
func genMan(root *cobra.Command, dir string, date time.Time) error {
	root.DisableAutoGenTag = true // no generation date in every page's history
	// A default computed on the machine is shown as how it is computed,
	// so the pages are the same wherever they are made.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if d, ok := machineDefaults[f.Name]; ok {
				f.DefValue = d
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return doc.GenManTree(root, &doc.GenManHeader{Title: "CCATTLER", Section: "1", Source: "CCattler", Manual: "CCattler Manual", Date: &date}, dir)
}
