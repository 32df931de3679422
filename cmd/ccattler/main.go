// Command ccattler is the CCattler control plane, node agent and client in one binary.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	root := newRootCmd()
	err := explainDenied(explainDeadline(asUsage(root, root.Execute())))
	if g.cancelDeadline != nil {
		g.cancelDeadline()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// exitError carries a specific exit code: 1 is a failure of the command's
// work (a rejected file, an unreachable etcd), 2 a usage mistake.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return exitError{code: 2, err: fmt.Errorf(format, args...)}
}
