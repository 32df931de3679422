package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ccattler/ccattler/agent"
	"github.com/ccattler/ccattler/facts"
	"github.com/ccattler/ccattler/facts/access"
	"github.com/spf13/cobra"
)

func init() { subcommands = append(subcommands, newLogsCmd) }

func newLogsCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs INSTANCE [--follow]",
		Short: "Show what an instance's container wrote to stdout and stderr",
		Long: `Show the output of an instance's container. The node is found from the facts
(placement/instance/{id}, or for an instance no longer placed the node its
agent reported); the node's agent serves the output at the address it
reports in observed/node/{id}/logs, which it does when started with
--logs-address. With --follow, output is streamed until the container is
gone or Ctrl-C.

In a secure cluster the agent serves HTTPS on the node's certificate and
asks for the client's: the same certificates as for etcd (--tls-dir,
--cert/--key/--cacert), of a user or an auditor; the node is believed only
when its certificate names it (node:{id}, or its fleet node:{prefix}*).`,
		Example: `  ccattler logs a8f31
  ccattler logs a8f31 --follow`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := facts.CheckSegment("instance-id", id); err != nil {
				return usageError("logs: %v", err)
			}
			s, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			node, addr, err := logsAddress(cmd.Context(), s, id)
			s.Close()
			if err != nil {
				return err
			}
			// The node's agent serves on its own identity when the
			// cluster is secure: the same certificates as for etcd.
			tlsCfg, _, err := g.connection(access.Admin)
			if err != nil {
				return err
			}
			c, err := logsClient(tlsCfg, node)
			if err != nil {
				return err
			}
			if !follow {
				c.Timeout = time.Minute
			}
			return streamLogs(cmd.Context(), cmd.OutOrStdout(), c, agent.LogURL(addr, node, id, follow, tlsCfg != nil))
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep streaming what the container writes")
	return cmd
}

// logsAddress finds the node of instance id and where its agent serves logs.
// The placement comes first: it is the engine's word, where the node the
// instance reports is only its agent's.
func logsAddress(ctx context.Context, s *facts.Store, id string) (node, addr string, err error) {
	for _, key := range []string{facts.Placement(id), facts.InstanceNode(id)} {
		f, ok, err := s.Get(ctx, key)
		if err != nil {
			return "", "", err
		}
		if v, isStr := facts.StringValue(f.Value); ok && isStr && v != "" {
			node = v
			break
		}
	}
	if node == "" {
		if _, ok, _ := s.Get(ctx, facts.InstanceState(id)); !ok {
			return "", "", exitError{code: 1, err: fmt.Errorf("logs: no instance %s (see ccattler get instances)", id)}
		}
		return "", "", exitError{code: 1, err: fmt.Errorf("logs: instance %s was never placed on a node: it has no output", id)}
	}
	f, ok, err := s.Get(ctx, facts.NodeLogs(node))
	if err != nil {
		return "", "", err
	}
	addr, _ = facts.StringValue(f.Value)
	if !ok || addr == "" {
		return "", "", exitError{code: 1, err: fmt.Errorf("logs: node %s does not serve container output: start its agent with --logs-address 127.0.0.1:7070 (%s is absent)", node, facts.NodeLogs(node))}
	}
	return node, addr, nil
}

func streamLogs(ctx context.Context, out io.Writer, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return exitError{code: 1, err: fmt.Errorf("logs: the node's agent does not answer at %s: %w", url, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return exitError{code: 1, err: fmt.Errorf("logs: %s", strings.TrimSpace(string(msg)))}
	}
	if _, err := io.Copy(out, resp.Body); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs: %w", err)
	}
	return nil
}
