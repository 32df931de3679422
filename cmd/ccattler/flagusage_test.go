package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pflag takes the first `quoted` words of a flag's usage as the name of its
// value in --help ("--tls-dir `dir`" prints "--tls-dir dir"): a usage that
// quotes a command instead printed "--tls-dir ccattler certs" on every
// command's help. Every flag of every command names its value in one word.
func TestFlagValuesHaveOneWordNames(t *testing.T) {
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			n++
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " \t") {
				t.Errorf("%s --%s: its help names the value %q; quote no phrase in the usage: %q", c.CommandPath(), f.Name, name, f.Usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	if n < 100 {
		t.Fatalf("checked %d flags: the tree is not what the binary has", n)
	}
}
