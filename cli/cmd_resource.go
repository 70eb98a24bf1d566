package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratahq/strata/cli/client"
)

// resourceCommands are the commands on one resource: scale, rollback,
// logs, and jobs (cmd_jobs.go).
type resourceCommands struct{ *App }

func (a resourceCommands) scaleCommand() *cobra.Command {
	var replicas int
	cmd := a.command(&cobra.Command{
		Use:     "scale RESOURCE --replicas N",
		Short:   "Set a resource's replica count (not a new revision)",
		Example: `  stratactl scale web --replicas 6`,
		Args:    args(cobra.ExactArgs(1)),
	}, action{
		check: needsFlag("replicas", "scale needs --replicas N"),
		do: func(ctx context.Context, c *client.Client, argv []string) error {
			r, err := c.Resources.Scale(ctx, argv[0], replicas)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.io.Out, "%s/%s scaled to %d replicas\n", strings.ToLower(string(r.Kind)), r.Name, r.Replicas)
			return nil
		},
	})
	cmd.Flags().IntVar(&replicas, "replicas", 0, "the total over every region")
	return cmd
}

func (a resourceCommands) rollbackCommand() *cobra.Command {
	var to int64
	cmd := a.command(&cobra.Command{
		Use:   "rollback RESOURCE --to REVISION",
		Short: "Make a new revision with the spec of an earlier one",
		Long: `Make a new revision with the spec of an earlier one, rolled out like any
other. List the revisions with ` + "`stratactl get revisions RESOURCE`" + `.`,
		Example: `  stratactl rollback web --to 1`,
		Args:    args(cobra.ExactArgs(1)),
	}, action{
		check: needsFlag("to", "rollback needs --to REVISION"),
		do: func(ctx context.Context, c *client.Client, argv []string) error {
			before, err := c.Resources.Get(ctx, argv[0])
			if err != nil {
				return err
			}
			r, err := c.Resources.Rollback(ctx, argv[0], to)
			if err != nil {
				return err
			}
			ref := strings.ToLower(string(r.Kind)) + "/" + r.Name
			if r.Revision == before.Revision {
				fmt.Fprintf(a.io.Out, "%s unchanged: revision %d already has the spec of revision %d\n", ref, r.Revision, to)
				return nil
			}
			fmt.Fprintf(a.io.Out, "%s rolled back to the spec of revision %d, as revision %d\n", ref, to, r.Revision)
			return nil
		},
	})
	cmd.Flags().Int64Var(&to, "to", 0, "the revision whose spec to restore")
	return cmd
}

func (a resourceCommands) logsCommand() *cobra.Command {
	var q client.LogQuery
	cmd := a.command(&cobra.Command{
		Use:   "logs RESOURCE [--replica ID] [-c CONTAINER] [-f] [--tail N]",
		Short: "Print a replica's output",
		Long: `Print the output of one of a resource's replicas: --replica, or else the
server picks a ready one. Of a pod, -c picks a container or init
container by name (default: the main one). -f follows new output until
Ctrl-C.`,
		Example: `  stratactl logs web
  stratactl logs web --replica web-j95hcqe4 -f --tail 100
  stratactl logs web -c sidecar`,
		Args: args(cobra.ExactArgs(1)),
	}, action{
		check: func(*cobra.Command, []string) error {
			if q.Tail < 0 {
				return usageErrorf("--tail must not be negative")
			}
			return nil
		},
		do: func(ctx context.Context, c *client.Client, argv []string) error {
			return c.Resources.Logs(ctx, argv[0], q, a.io.Out)
		},
	})
	f := cmd.Flags()
	f.StringVar(&q.Replica, "replica", "", "replica id, as listed by \"stratactl get replicas RESOURCE\" (default: the first ready one)")
	f.BoolVarP(&q.Follow, "follow", "f", false, "keep printing new output until Ctrl-C")
	f.IntVar(&q.Tail, "tail", 0, "start with the last N lines (default: everything the node kept)")
	f.StringVarP(&q.Container, "container", "c", "", "container of a pod to read, or init container (default: the main one)")
	return cmd
}

// needsFlag is the check of a command that cannot go without a flag.
func needsFlag(name, msg string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if !cmd.Flags().Changed(name) {
			return usageErrorf("%s", msg)
		}
		return nil
	}
}
