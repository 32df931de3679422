package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes are the same in every command: 0 the command did its work, 1
// it failed (a rejected file, an unreachable etcd, a missing object), 2 it
// was used wrongly (an unknown flag or subcommand, a bad argument). Cobra
// reports the usage mistakes it finds itself — flags it cannot parse,
// arguments its Args validators refuse, an unknown subcommand of the root —
// as plain errors before any command runs; ranCommand tells them apart from
// a command's own failures.
var ranCommand bool

// asUsage classifies an error Execute returned: one found by cobra before
// the command ran is a usage mistake (exit 2), with the way to the help.
func asUsage(root *cobra.Command, err error) error {
	if err == nil || ranCommand {
		return err
	}
	if _, ok := err.(exitError); ok {
		return err
	}
	path := root.CommandPath()
	if c, _, ferr := root.Find(os.Args[1:]); ferr == nil && c != nil {
		path = c.CommandPath()
	}
	return usageError("%v\nRun '%s --help' for usage.", err, path)
}

// withExample makes a command's argument mistakes say what was expected
// and show the first example: cobra's own "accepts 2 arg(s), received 1"
// says neither. A validator's own usage error stands as it is.
func withExample(valid cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		err := valid(cmd, args)
		if err == nil {
			return nil
		}
		if _, ok := err.(exitError); ok {
			return err
		}
		got := strings.TrimSpace(cmd.CommandPath() + " " + strings.Join(args, " "))
		want := strings.TrimSuffix(cmd.UseLine(), " [flags]")
		msg := fmt.Sprintf("%s: expected %s", got, want)
		for _, line := range strings.Split(cmd.Example, "\n") {
			if line, _, _ = strings.Cut(line, "#"); strings.TrimSpace(line) != "" {
				msg += ", e.g. " + strings.TrimSpace(line)
				break
			}
		}
		return usageError("%s\nRun '%s --help' for usage.", msg, cmd.CommandPath())
	}
}

// strictUsage makes the command groups (rules, facts, cluster, ...) refuse
// an unknown subcommand with exit 2: cobra would print their help and exit
// 0, so a mistyped `ccattler rules relaod` in a script would pass. The help
// command likewise refuses an unknown topic.
func strictUsage(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Args != nil {
			c.Args = withExample(c.Args)
		}
		if c.HasParent() && c.HasSubCommands() && !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if len(args) > 0 {
					return usageError("unknown command %q for %q\nRun '%s --help' for usage.", args[0], cmd.CommandPath(), cmd.CommandPath())
				}
				return cmd.Help()
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, c := range root.Commands() {
		if c.Name() != "help" {
			continue
		}
		c.Run = nil
		c.RunE = func(cmd *cobra.Command, args []string) error {
			target, _, err := root.Find(args)
			if target == nil || err != nil || (len(args) > 0 && target == root) {
				return usageError("unknown help topic %q\nRun '%s --help' for usage.", strings.Join(args, " "), root.CommandPath())
			}
			return target.Help()
		}
	}
}
