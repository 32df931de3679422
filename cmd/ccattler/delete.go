package main

import (
	"errors"
	"fmt"
	"github.com/ccattler/ccattler/facts/spec"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newDeleteCmd) }

// deleteKinds maps what users type to what is deleted.
var deleteKinds = map[string]spec.Kind{
	"service": spec.KindService, "services": spec.KindService, "svc": spec.KindService,
	"volume": spec.KindVolume, "volumes": spec.KindVolume, "vol": spec.KindVolume,
}

func newDeleteCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "delete service|volume NAME",
		Short: "Remove a service's or volume's desired facts",
		Long: `Remove every desired/service/NAME/... fact and the user's intent
intent/user/service/NAME/instances (or every desired/volume/NAME/... fact) in one
transaction. The controllers then stop what no longer is desired.`,
		Example: `  ccattler delete service web
  ccattler delete volume data --dry-run`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError("delete: expected KIND NAME, such as `ccattler delete service web`; got %d arguments", len(args))
			}
			kind, ok := deleteKinds[args[0]]
			if !ok {
				return usageError("delete: unknown kind %q: expected service or volume", args[0])
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			res, err := spec.Delete(cmd.Context(), s, kind, args[1], spec.Options{DryRun: dryRun})
			var refused *spec.RefusedError
			if errors.As(err, &refused) {
				_ = spec.WriteDiagnostics(cmd.ErrOrStderr(), nil, refused.Diags)
				return exitError{code: 1, err: fmt.Errorf("delete %s %s refused; nothing was deleted", args[0], args[1])}
			}
			if err != nil {
				return err
			}
			return printResult(cmd.OutOrStdout(), res, dryRun)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be deleted, delete nothing")
	return cmd
}
